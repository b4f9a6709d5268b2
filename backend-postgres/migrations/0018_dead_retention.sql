-- A bound on dead letters (leaseq_core::Retention::dead), stored with the
-- rest of the queue's policy. NULL bounds are no bound (the default keeps
-- dead letters for ever). `History::collect` removes those past the bound
-- through the dead index (queue, dead_at, id), oldest death first.
-- Nullable columns without a default: no rewrite, no scan.
ALTER TABLE leaseq_retention
    ADD COLUMN dead_age_ms bigint CHECK (dead_age_ms >= 0),
    ADD COLUMN dead_count  bigint CHECK (dead_count >= 0);
