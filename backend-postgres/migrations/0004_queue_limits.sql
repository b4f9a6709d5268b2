-- Global limits per queue (`Backend::set_queue_limits`): one row per queue
-- that has any. A claim on a queue with a row takes the row's lock
-- (`FOR UPDATE`), counts the queue's Leased rows through the leased
-- partial index, claims what the limits allow and counts the claim in the
-- row's rate window, all in one transaction: claims on a limited queue take
-- turns, claims on other queues never touch this table but for one probe
-- of its primary key. The window is fixed: window i covers
-- [i * per_ms, (i + 1) * per_ms) ms since the epoch on the server's clock;
-- `window_start` is its start and `window_used` the items leased in it.

CREATE TABLE leaseq_queue_limits (
    queue        text    PRIMARY KEY CHECK (octet_length(queue) BETWEEN 1 AND 128),
    concurrency  integer CHECK (concurrency IS NULL OR concurrency >= 1),
    rate         integer CHECK (rate IS NULL OR rate >= 1),
    per_ms       bigint  CHECK (per_ms IS NULL OR per_ms BETWEEN 1 AND 86400000),
    window_start bigint,
    window_used  bigint  NOT NULL DEFAULT 0 CHECK (window_used >= 0),
    CONSTRAINT leaseq_queue_limits_rate CHECK ((rate IS NULL) = (per_ms IS NULL)),
    CONSTRAINT leaseq_queue_limits_some CHECK (concurrency IS NOT NULL OR rate IS NOT NULL)
);
