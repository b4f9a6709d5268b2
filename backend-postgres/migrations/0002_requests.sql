-- Recent `enqueue_once` requests: one row per (queue, request id) with the
-- results of the call that wrote the batch, so a resend after a lost reply
-- gets them back instead of writing the batch again. The row is inserted in
-- the same transaction as the batch, so a concurrent resend waits on it
-- until the first call commits (or rolls back). `reap` deletes rows whose
-- memory ran out.

CREATE TABLE leaseq_requests (
    queue        text        NOT NULL,
    request      uuid        NOT NULL,
    -- The ids and dedup flags the first call returned, in batch order; NULL
    -- only inside the transaction of the call that writes them.
    ids          bigint[],
    deduplicated boolean[],
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (queue, request),
    CONSTRAINT leaseq_requests_results CHECK (
        (ids IS NULL) = (deduplicated IS NULL)
        AND (ids IS NULL OR cardinality(ids) = cardinality(deduplicated))
    )
);

-- Reap: expired requests of a queue, oldest first.
CREATE INDEX leaseq_requests_expiry ON leaseq_requests (queue, expires_at);
