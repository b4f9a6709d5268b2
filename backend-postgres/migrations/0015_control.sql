-- Control of running work (leaseq_core::Control) and live workers
-- (leaseq_core::WorkerRegistry).
--
-- An item's cancel request and its lease's progress live on its row. Only a
-- Leased row carries a cancel request: every statement that ends a lease
-- deletes a row that has one (the item ends Cancelled), so the flag never
-- outlives its lease. The progress is shown only while the row is Leased
-- under the token that wrote it (`progress_token`), and the statements that
-- end a lease clear it, so a new lease starts with none and the claim
-- writes nothing for it. New columns with a constant default: no rewrite;
-- the checks are NOT VALID, so no scan either (every existing row holds
-- them: its new columns are false and NULL).
ALTER TABLE leaseq_items
    ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false,
    ADD COLUMN progress bytea,
    ADD COLUMN progress_token uuid,
    ADD CONSTRAINT leaseq_items_cancel_leased
        CHECK (NOT cancel_requested OR state = 'leased') NOT VALID,
    -- `limits::MAX_PROGRESS_LEN`.
    ADD CONSTRAINT leaseq_items_progress_len
        CHECK (progress IS NULL OR octet_length(progress) <= 4096) NOT VALID;

-- A queue's pause lives on its limits row, which the claim statement
-- already reads by its primary key: an unpaused claim reads nothing more.
-- A row may now hold a pause without limits, or (for a moment, until the
-- statement after the change deletes it) neither, so the check that a row
-- holds some limit goes; the claim judges the columns, not the row.
ALTER TABLE leaseq_queue_limits
    ADD COLUMN paused boolean NOT NULL DEFAULT false,
    DROP CONSTRAINT leaseq_queue_limits_some;

-- Live workers: one row per worker, its entry as the core encodes it
-- (JSON text, read back as written), until `expires_at`. Not queue-scoped.
-- Registering and listing delete expired rows through the expiry index, so
-- their cost follows the number of workers, never of items.
CREATE TABLE leaseq_workers (
    id         text        PRIMARY KEY CHECK (octet_length(id) BETWEEN 1 AND 128),
    entry      text        NOT NULL CHECK (octet_length(entry) <= 131072),
    expires_at timestamptz NOT NULL
);

CREATE INDEX leaseq_workers_expiry ON leaseq_workers (expires_at);
