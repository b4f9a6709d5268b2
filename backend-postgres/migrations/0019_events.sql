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

-- Whether queue `q`'s gate is live. A function rather than an `EXISTS` in
-- each statement: the statements are planned at every call (custom
-- plans), and a subquery on a table costs their planning far more (about
-- 0.07 ms) than a call does; PL/pgSQL keeps its own plan of the probe for
-- the session. STABLE, so a call with the statement's queue parameter is
-- made once per statement. The search path is this schema's, as at
-- creation, whatever the caller's.
CREATE FUNCTION leaseq_events_watched(q text) RETURNS boolean
    LANGUAGE plpgsql STABLE
    SET search_path FROM CURRENT
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM leaseq_event_listeners WHERE queue = q AND until > now());
END
$$;
