-- Keep autovacuum off the records table while it is only a few pages. Vacuumed or analyzed at
-- that size, its lookups by record key are planned as sequential scans, and the generic plans of
-- prepared statements (sqlx caches them per connection) keep them while a fresh deployment's
-- traffic grows the table, until autovacuum visits it again, up to a minute later (in the HTTP
-- benchmark a separate-claim create went from 306-335 to 511-662 us of PostgreSQL CPU). A table
-- never vacuumed or analyzed is planned as at least ten pages, with its index. By default the
-- first autovacuum comes after 50 dead rows (each separate-claim create leaves one) and the
-- first autoanalyze after 50 changed rows; now each waits for 1,000 (tens of pages, where the
-- index wins), and past that the usual scale factors dominate. Manual VACUUM and ANALYZE are
-- not affected.
ALTER TABLE idempotency_records SET (
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_threshold = 1000,
    autovacuum_analyze_threshold = 1000
);
