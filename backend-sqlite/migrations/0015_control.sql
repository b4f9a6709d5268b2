-- Control of running work (issue 42): cancel requests, progress, pause, and
-- the live workers.

-- An operator asked to cancel the leased item: its lease runs on, and the
-- step that ends it deletes the item (the trigger below).
ALTER TABLE leaseq_items ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0
    CHECK (cancel_requested IN (0, 1));
-- The progress a lease recorded, and the token of that lease: shown only
-- while the item is leased under that token, so a new lease starts with
-- none and no claim has to clear it.
ALTER TABLE leaseq_items ADD COLUMN progress BLOB
    CHECK (progress IS NULL OR length(progress) <= 4096);
ALTER TABLE leaseq_items ADD COLUMN progress_token BLOB
    CHECK (progress_token IS NULL OR length(progress_token) = 16);

-- A cancel-requested row never leaves Leased alive: the statement that
-- moves it out (ack aside: release, give_back, fail, snooze, reap) or that
-- marks a row not leased (cancel) deletes it in the same statement, so it
-- ends Cancelled and its dedup key is free. The statement's RETURNING still
-- shows the row as it set it, with cancel_requested = 1, for the answer.
CREATE TRIGGER leaseq_cancelled_end AFTER UPDATE OF state, cancel_requested ON leaseq_items
WHEN NEW.cancel_requested = 1 AND NEW.state <> 'leased'
BEGIN
    DELETE FROM leaseq_items WHERE id = NEW.id;
END;

-- A cancelled item is not acked: its key is not held (unique_for).
DROP TRIGGER leaseq_hold_after_ack;
CREATE TRIGGER leaseq_hold_after_ack AFTER DELETE ON leaseq_items
WHEN OLD.unique_for_ms IS NOT NULL AND OLD.dedup_key IS NOT NULL AND OLD.cancel_requested = 0
BEGIN
    DELETE FROM leaseq_held_keys
    WHERE queue = OLD.queue
      AND held_until <= CAST(round(unixepoch('subsec') * 1000) AS INTEGER);
    INSERT INTO leaseq_held_keys (queue, dedup_key, id, held_until)
    VALUES (OLD.queue, OLD.dedup_key, OLD.id,
            CAST(round(unixepoch('subsec') * 1000) AS INTEGER) + OLD.unique_for_ms)
    ON CONFLICT (queue, dedup_key) DO UPDATE
        SET id = excluded.id, held_until = excluded.held_until;
END;

-- The pause lives in the limits row, which a claim already probes: a queue
-- with a row is claimed under it (src/limits.rs), so an unpaused queue
-- without limits pays nothing. A row may now hold a pause alone, so the
-- table is rebuilt with that in its check (SQLite cannot alter a check).
CREATE TABLE leaseq_queue_limits_new (
    queue        TEXT    PRIMARY KEY
                 CHECK (length(CAST(queue AS BLOB)) BETWEEN 1 AND 128),
    concurrency  INTEGER CHECK (concurrency IS NULL OR concurrency BETWEEN 1 AND 2147483647),
    rate         INTEGER CHECK (rate IS NULL OR rate BETWEEN 1 AND 2147483647),
    per_ms       INTEGER CHECK (per_ms IS NULL OR per_ms BETWEEN 1 AND 86400000),
    window_start INTEGER,
    window_used  INTEGER NOT NULL DEFAULT 0 CHECK (window_used >= 0),
    paused       INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    CONSTRAINT leaseq_queue_limits_rate CHECK ((rate IS NULL) = (per_ms IS NULL)),
    CONSTRAINT leaseq_queue_limits_some
        CHECK (concurrency IS NOT NULL OR rate IS NOT NULL OR paused = 1)
) STRICT;
INSERT INTO leaseq_queue_limits_new (queue, concurrency, rate, per_ms, window_start, window_used)
    SELECT queue, concurrency, rate, per_ms, window_start, window_used FROM leaseq_queue_limits;
DROP TABLE leaseq_queue_limits;
ALTER TABLE leaseq_queue_limits_new RENAME TO leaseq_queue_limits;

-- Live workers: one row per registered worker, its entry as JSON, expiring
-- at `expires_at` (epoch ms) unless registered again. Expired rows are
-- deleted by the next register, through the expiry index.
CREATE TABLE leaseq_workers (
    id         TEXT    PRIMARY KEY CHECK (length(CAST(id AS BLOB)) BETWEEN 1 AND 128),
    entry      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX leaseq_workers_expiry ON leaseq_workers (expires_at);
