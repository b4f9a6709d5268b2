-- The gate of job events (leaseq_core::Events; src/events.rs).
--
-- A process with a subscriber to a queue's events keeps the queue's row
-- here, its `until` 30 s ahead, renewed every 10 s. Each statement that
-- changes a job sends its events (`pg_notify`, in the same statement) only
-- while the row of its queue is live (`until > now()`), read once per
-- statement through the primary key: a queue nobody follows pays that one
-- probe and builds no event. Rows that lapsed stay until a subscriber sets
-- them again; there is at most one per queue ever followed.
CREATE TABLE leaseq_event_listeners (
    queue text        PRIMARY KEY,
    until timestamptz NOT NULL
);
