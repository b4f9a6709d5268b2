-- Finished items kept per queue (leaseq_core::History).
--
-- A queue's retention policy is a row of `leaseq_retention`, present only
-- when the policy keeps something: the statements that end an item join
-- their deleted rows to it by its primary key, so a queue that keeps
-- nothing pays one probe of an index that holds only the queues that keep.
-- `keep_*` say whether the policy keeps that ending at all (a count of 0
-- or an age of 0 keeps nothing); NULL bounds are no bound.
CREATE TABLE leaseq_retention (
    queue              text    PRIMARY KEY CHECK (octet_length(queue) BETWEEN 1 AND 128),
    keep_completed     boolean NOT NULL,
    completed_age_ms   bigint  CHECK (completed_age_ms >= 0),
    completed_count    bigint  CHECK (completed_count >= 0),
    keep_cancelled     boolean NOT NULL,
    cancelled_age_ms   bigint  CHECK (cancelled_age_ms >= 0),
    cancelled_count    bigint  CHECK (cancelled_count >= 0)
);

-- One row per kept item, written by the statement that ended it (the row
-- it deleted from `leaseq_items`, with the ending, the time and the
-- handler's result). The order index serves the listing (newest first)
-- and the collection (oldest first, stopping at the first one kept), per
-- queue and ending.
CREATE TABLE leaseq_finished (
    queue       text        NOT NULL,
    id          bigint      NOT NULL,
    ending      text        NOT NULL CHECK (ending IN ('completed', 'cancelled')),
    finished_at timestamptz NOT NULL,
    enqueued_at timestamptz NOT NULL,
    attempts    integer     NOT NULL CHECK (attempts >= 0),
    payload     bytea       NOT NULL,
    last_error  text,
    -- `finished::MAX_RESULT_LEN`.
    result      bytea       CHECK (result IS NULL OR octet_length(result) <= 524288),
    PRIMARY KEY (queue, id)
);

CREATE INDEX leaseq_finished_order ON leaseq_finished (queue, ending, finished_at, id);
