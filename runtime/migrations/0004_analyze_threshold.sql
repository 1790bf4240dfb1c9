-- Keep autovacuum from analyzing the records table while it is only a few pages. On such
-- statistics the planner plans a lookup by record key as a sequential scan, and the generic
-- plans of prepared statements (sqlx caches them per connection) keep that plan while a fresh
-- deployment's traffic grows the table, until the next autoanalyze, up to a minute later (in the
-- HTTP benchmark a separate-claim create went from 306-335 to 511-662 us of PostgreSQL CPU). A
-- table never analyzed is planned as at least ten pages, with the index. The first autoanalyze
-- now waits for 1,000 changed rows (tens of pages, where the index wins); past that the usual
-- 10 % scale factor dominates. A manual ANALYZE is not affected.
ALTER TABLE idempotency_records SET (autovacuum_analyze_threshold = 1000);
