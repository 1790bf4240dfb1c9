-- idemgen-runtime 0003: holder leases (protocol.md, "Durability of claims"). Plain SQL usable by
-- any migration tool.
--
-- Every executor (a process's) registers a lease here and renews it every few seconds, by the
-- database's clock; a claim names its holder. A claim whose holder's lease has expired, or ended
-- (the row deleted at a clean shutdown, or purged), is stale at once and taken over by the next
-- attempt with a new claim token. Claims with a NULL holder (written by earlier releases, or by an
-- executor without a lease) keep the stale-claim timeout as their only rule.
--
-- Nothing to guard: the new column is nullable, with no default (a catalogue change, no table
-- rewrite), and the previous release's statements name their columns, so they keep working and
-- write NULL.
CREATE TABLE idempotency_holders (
    holder_id    uuid        PRIMARY KEY,
    -- The last renewal and the instant the lease lapses without another, both by the database
    -- clock (`clock_timestamp()`), so no process's clock is ever compared with another's.
    heartbeat_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL
);

ALTER TABLE idempotency_records ADD COLUMN holder_id uuid NULL;
