-- Takeover traces: the (item, token) of each lease a reap took from its
-- holder after it expired, written in the reap's own statement. After a
-- lost reply, lease_fate reads them to tell a lease its own call ended
-- (no trace) from one a reaper took (a trace), also past the lease's
-- expiry. Only the reap writes them, so acks pay nothing. The reap deletes
-- traces older than leaseq_core::limits::FINISH_MEMORY (60 s), through
-- the age index, so they hold what was reaped in the last minute.
CREATE TABLE leaseq_takeovers (
    id       bigint      NOT NULL,
    token    uuid        NOT NULL,
    queue    text        NOT NULL,
    taken_at timestamptz NOT NULL,
    PRIMARY KEY (id, token)
);

CREATE INDEX leaseq_takeovers_age ON leaseq_takeovers (queue, taken_at);
