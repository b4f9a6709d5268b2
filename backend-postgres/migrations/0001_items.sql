-- One row per unfinished item. Acked items are deleted, so the table holds
-- only Ready, Scheduled, Leased and Dead items. Every object is created in the
-- schema the backend was configured with (it is first on the search_path
-- while migrations run).

CREATE SEQUENCE leaseq_item_id AS bigint;

CREATE TABLE leaseq_items (
    id               bigint      PRIMARY KEY DEFAULT nextval('leaseq_item_id'),
    queue            text        NOT NULL,
    state            text        NOT NULL
                     CHECK (state IN ('ready', 'scheduled', 'leased', 'dead')),
    priority         integer     NOT NULL DEFAULT 0,
    -- NULL only for a row whose item is missing (repaired by claim).
    payload          bytea,
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     integer     NOT NULL CHECK (max_attempts >= 1),
    dedup_key        text,
    token            uuid,
    enqueued_at      timestamptz NOT NULL DEFAULT now(),
    available_at     timestamptz NOT NULL DEFAULT now(),
    lease_expires_at timestamptz,
    dead_at          timestamptz,
    last_error       text,
    CONSTRAINT leaseq_items_lease_fields CHECK (
        (state = 'leased') = (token IS NOT NULL AND lease_expires_at IS NOT NULL)
    )
);

ALTER SEQUENCE leaseq_item_id OWNED BY leaseq_items.id;

-- Claim: the head of a queue's Ready set in claim order.
CREATE INDEX leaseq_items_ready ON leaseq_items (queue, priority DESC, id)
    WHERE state = 'ready';
-- Claim (due Scheduled items) and promotion: by due time.
CREATE INDEX leaseq_items_scheduled ON leaseq_items (queue, available_at, id)
    WHERE state = 'scheduled';
-- Reap: expired leases only, by expiry.
CREATE INDEX leaseq_items_leased ON leaseq_items (queue, lease_expires_at, id)
    WHERE state = 'leased';
-- Redrive and inspection: death order.
CREATE INDEX leaseq_items_dead ON leaseq_items (queue, dead_at, id)
    WHERE state = 'dead';
-- INV-9: one holder per dedup key and queue, in every state until acked.
CREATE UNIQUE INDEX leaseq_items_dedup ON leaseq_items (queue, dedup_key)
    WHERE dedup_key IS NOT NULL;

-- A queue table sees every row updated and deleted within seconds: vacuum it
-- after a small fraction of churn, without cost-based sleeping, so dead
-- tuples do not pile up in front of the claim index.
ALTER TABLE leaseq_items SET (
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0.0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0,
    fillfactor = 70
);
