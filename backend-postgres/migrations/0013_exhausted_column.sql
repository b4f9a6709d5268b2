-- The poison index's third case, `attempts >= max_attempts`, compares two
-- columns: the planner cannot estimate it and takes a third of the rows to
-- match. On a queue of 1,000,000 Ready items it then answered the claim's
-- poison probe with a scan of the whole table (about 0.3 s per claim)
-- instead of the (empty) poison index. A stored column holds the
-- comparison, so ANALYZE counts it (nearly always false) and the probe goes
-- through the index. Adding it rewrites the table once, under its lock.
ALTER TABLE leaseq_items
    ADD COLUMN exhausted boolean GENERATED ALWAYS AS (attempts >= max_attempts) STORED;
DROP INDEX leaseq_items_poison;
CREATE INDEX leaseq_items_poison ON leaseq_items (queue, state)
    WHERE payload IS NULL OR attempts = 2147483647
       OR (exhausted AND state IN ('ready', 'scheduled'));
