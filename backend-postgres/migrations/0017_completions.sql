-- The completion counter of each queue (QueueStats::completed).
--
-- Every statement that completes items (ack, ack_many, complete) adds
-- them here in that same statement. A single row per queue would make
-- concurrent acks of a queue wait on one another's row lock until each
-- commits; instead a queue has a few stripes, and a statement adds to the
-- stripe of its server process (`pg_backend_pid()` modulo the stripes, see
-- src/completions.rs), so acks on different connections rarely meet.
-- Stats sums a queue's stripes through the primary key; delete_queue
-- deletes them, a purge keeps them. Free space on each page keeps the
-- updates HOT.
CREATE TABLE leaseq_completions (
    queue text     NOT NULL,
    slot  smallint NOT NULL,
    n     bigint   NOT NULL CHECK (n >= 0),
    PRIMARY KEY (queue, slot)
) WITH (fillfactor = 50);
