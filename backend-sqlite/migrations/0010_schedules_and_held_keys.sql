-- Periodic schedules and unique-for dedup keys.
--
-- One row per schedule. `spec` is the core's text of the cadence, time zone
-- and policy, opaque here. `revision` rises on every change of queue, spec
-- or payload; `last_tick` is the latest tick fired (epoch ms), kept across
-- revisions. A fire runs in one BEGIN IMMEDIATE transaction: it checks the
-- revision, the last tick and SQLite's clock, enqueues the item and records
-- the tick.
CREATE TABLE leaseq_schedules (
    name       TEXT    PRIMARY KEY
               CHECK (length(CAST(name AS BLOB)) BETWEEN 1 AND 128),
    queue      TEXT    NOT NULL
               CHECK (length(CAST(queue AS BLOB)) BETWEEN 1 AND 128),
    spec       TEXT    NOT NULL,
    payload    BLOB    NOT NULL,
    revision   INTEGER NOT NULL CHECK (revision >= 1),
    defined_at INTEGER NOT NULL,
    last_tick  INTEGER
) STRICT;

-- How long (ms) an item's dedup key stays held after its ack; NULL: not.
ALTER TABLE leaseq_items ADD COLUMN unique_for_ms INTEGER
    CHECK (unique_for_ms IS NULL OR unique_for_ms > 0);

-- Dedup keys held after their item's ack, until `held_until` (epoch ms): an
-- enqueue with the key returns `id` (the acked item) while the hold lasts.
CREATE TABLE leaseq_held_keys (
    queue      TEXT    NOT NULL,
    dedup_key  TEXT    NOT NULL,
    id         INTEGER NOT NULL,
    held_until INTEGER NOT NULL,
    PRIMARY KEY (queue, dedup_key)
) STRICT;

CREATE INDEX leaseq_held_keys_expiry ON leaseq_held_keys (queue, held_until);

-- The ack deletes the item; for an item with a hold, the same statement
-- (through this trigger) holds its key from now on and drops the queue's
-- holds that ran out. Purge deletes a queue's holds after its items.
CREATE TRIGGER leaseq_hold_after_ack AFTER DELETE ON leaseq_items
WHEN OLD.unique_for_ms IS NOT NULL AND OLD.dedup_key IS NOT NULL
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
