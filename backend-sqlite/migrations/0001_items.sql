-- One row per unfinished item. Acked items are deleted, so the table holds
-- only Ready, Scheduled, Leased and Dead items. Times are epoch milliseconds
-- read from SQLite's clock inside each statement. STRICT keeps every column
-- to its declared type, so a counter can never hold text.
--
-- AUTOINCREMENT: an id is never handed out twice, not even after the rows
-- holding the largest ids were acked or purged.

CREATE TABLE leaseq_items (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT    NOT NULL
                     CHECK (length(CAST(queue AS BLOB)) BETWEEN 1 AND 128),
    state            TEXT    NOT NULL
                     CHECK (state IN ('ready', 'scheduled', 'leased', 'dead')),
    priority         INTEGER NOT NULL DEFAULT 0
                     CHECK (priority BETWEEN -2147483648 AND 2147483647),
    -- NULL only for a row whose item is missing (repaired by claim).
    payload          BLOB,
    attempts         INTEGER NOT NULL DEFAULT 0
                     CHECK (attempts BETWEEN 0 AND 2147483647),
    max_attempts     INTEGER NOT NULL
                     CHECK (max_attempts BETWEEN 1 AND 2147483647),
    dedup_key        TEXT
                     CHECK (dedup_key IS NULL OR length(CAST(dedup_key AS BLOB)) BETWEEN 1 AND 512),
    -- 16 bytes, big-endian: blobs compare as the u128 the token is.
    token            BLOB    CHECK (token IS NULL OR length(token) = 16),
    enqueued_at      INTEGER NOT NULL,
    available_at     INTEGER NOT NULL,
    lease_expires_at INTEGER,
    dead_at          INTEGER,
    last_error       TEXT
                     CHECK (last_error IS NULL OR length(CAST(last_error AS BLOB)) <= 4096),
    CONSTRAINT leaseq_items_lease_fields CHECK (
        (state = 'leased') = (token IS NOT NULL AND lease_expires_at IS NOT NULL)
    )
) STRICT;

-- Claim: the head of a queue's Ready set in claim order.
CREATE INDEX leaseq_items_ready ON leaseq_items (queue, priority DESC, id)
    WHERE state = 'ready';
-- Claim (due Scheduled items) and promotion: by due time.
CREATE INDEX leaseq_items_scheduled ON leaseq_items (queue, available_at, id)
    WHERE state = 'scheduled';
-- Reap: leases by expiry, so the expired ones are a prefix.
CREATE INDEX leaseq_items_leased ON leaseq_items (queue, lease_expires_at, id)
    WHERE state = 'leased';
-- Redrive and inspection: death order.
CREATE INDEX leaseq_items_dead ON leaseq_items (queue, dead_at, id)
    WHERE state = 'dead';
-- INV-9: one holder per dedup key and queue, in every state until acked.
CREATE UNIQUE INDEX leaseq_items_dedup ON leaseq_items (queue, dedup_key)
    WHERE dedup_key IS NOT NULL;
-- Rows a claim cannot lease: no payload (an entry whose item is missing) or
-- an attempt counter at its limit. Empty unless something went wrong, so
-- each claim looks here at the cost of one empty index probe.
CREATE INDEX leaseq_items_poison ON leaseq_items (queue, state)
    WHERE payload IS NULL OR attempts = 2147483647;

-- Recent `enqueue_once` requests: the results of the call that wrote the
-- batch, so a resend after a lost reply gets them back instead of writing
-- the batch again. Written in the batch's own transaction.
CREATE TABLE leaseq_requests (
    queue      TEXT    NOT NULL,
    request    BLOB    NOT NULL CHECK (length(request) = 16),
    -- The first call's results in batch order: ids, each followed by `d`
    -- when it was deduplicated, separated by commas.
    results    TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (queue, request)
) STRICT;

-- Reap: expired requests of a queue, oldest first.
CREATE INDEX leaseq_requests_expiry ON leaseq_requests (queue, expires_at);
