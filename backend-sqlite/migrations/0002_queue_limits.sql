-- Global limits per queue (`Backend::set_queue_limits`): one row per queue
-- that has any. A claim on a queue with a row runs in one BEGIN IMMEDIATE
-- transaction: it reads the row and the clock, counts the queue's Leased
-- rows through the leased partial index, claims what the limits allow and
-- counts the claim in the row's rate window. The window is fixed: window i
-- covers [i * per_ms, (i + 1) * per_ms) ms since the epoch on SQLite's
-- clock; `window_start` is its start and `window_used` the items leased in
-- it.

CREATE TABLE leaseq_queue_limits (
    queue        TEXT    PRIMARY KEY
                 CHECK (length(CAST(queue AS BLOB)) BETWEEN 1 AND 128),
    concurrency  INTEGER CHECK (concurrency IS NULL OR concurrency BETWEEN 1 AND 2147483647),
    rate         INTEGER CHECK (rate IS NULL OR rate BETWEEN 1 AND 2147483647),
    per_ms       INTEGER CHECK (per_ms IS NULL OR per_ms BETWEEN 1 AND 86400000),
    window_start INTEGER,
    window_used  INTEGER NOT NULL DEFAULT 0 CHECK (window_used >= 0),
    CONSTRAINT leaseq_queue_limits_rate CHECK ((rate IS NULL) = (per_ms IS NULL)),
    CONSTRAINT leaseq_queue_limits_some CHECK (concurrency IS NOT NULL OR rate IS NOT NULL)
) STRICT;
