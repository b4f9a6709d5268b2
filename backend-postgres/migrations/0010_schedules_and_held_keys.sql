-- Periodic schedules and unique-for dedup keys.
--
-- One row per schedule. `spec` is the core's text of the cadence, time zone
-- and policy, opaque here. `revision` rises on every change of queue, spec
-- or payload; `last_tick_ms` is the latest tick fired (epoch ms), kept
-- across revisions. A fire locks the row (FOR UPDATE), checks the revision,
-- the last tick and the server's clock, enqueues the item and records the
-- tick in one transaction.
CREATE TABLE leaseq_schedules (
    name         text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 128),
    queue        text        NOT NULL CHECK (octet_length(queue) BETWEEN 1 AND 128),
    spec         text        NOT NULL,
    payload      bytea       NOT NULL,
    revision     bigint      NOT NULL CHECK (revision >= 1),
    defined_at   timestamptz NOT NULL DEFAULT now(),
    last_tick_ms bigint
);

-- How long (ms) an item's dedup key stays held after its ack; NULL: not.
ALTER TABLE leaseq_items ADD COLUMN unique_for_ms bigint;

-- Dedup keys held after their item's ack, until `held_until`: an enqueue
-- with the key returns `id` (the acked item) while the hold lasts. The ack
-- writes the row in the statement that deletes the item; purge deletes a
-- queue's rows.
CREATE TABLE leaseq_held_keys (
    queue      text        NOT NULL,
    dedup_key  text        NOT NULL,
    id         bigint      NOT NULL,
    held_until timestamptz NOT NULL,
    PRIMARY KEY (queue, dedup_key)
);

-- Holds that ran out, by queue: pruned by the acks that add holds.
CREATE INDEX leaseq_held_keys_expiry ON leaseq_held_keys (queue, held_until);
