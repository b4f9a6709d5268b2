-- Completions per queue (QueueStats::completed): a counter that only grows,
-- kept by a trigger in the very statement that acks (ack, ack_many,
-- complete), so it is exact whichever process acked. An ack is the delete
-- of a Leased row; a cancel-requested one ends Cancelled and does not
-- count. Nothing else deletes a Leased row: remove_item, purge and
-- delete_queue move their rows out of Leased first. A purge keeps the row;
-- delete_queue deletes it (the queue counts from 0 again).
CREATE TABLE leaseq_queue_counts (
    queue     TEXT    PRIMARY KEY
              CHECK (length(CAST(queue AS BLOB)) BETWEEN 1 AND 128),
    completed INTEGER NOT NULL DEFAULT 0 CHECK (completed >= 0)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER leaseq_completion_counted AFTER DELETE ON leaseq_items
WHEN OLD.state = 'leased' AND OLD.cancel_requested = 0
BEGIN
    INSERT INTO leaseq_queue_counts (queue, completed) VALUES (OLD.queue, 1)
    ON CONFLICT (queue) DO UPDATE SET completed = completed + 1;
END;
