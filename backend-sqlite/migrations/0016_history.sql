-- Finished items kept per queue (issue 43): the retention policy, and the
-- kept items, recorded by triggers in the very statement that ends an item.

-- A queue's retention policy: one row per queue whose policy keeps
-- anything (no row: the default, nothing kept). Per ending, the age bound
-- in nanoseconds and the count bound (NULL: no bound), and how many of that
-- ending are kept now (kept up to date by the triggers on leaseq_finished,
-- so trimming to the count never counts rows).
CREATE TABLE leaseq_retention (
    queue           TEXT    PRIMARY KEY
                    CHECK (length(CAST(queue AS BLOB)) BETWEEN 1 AND 128),
    completed_age   INTEGER CHECK (completed_age IS NULL OR completed_age >= 0),
    completed_count INTEGER CHECK (completed_count IS NULL OR completed_count >= 0),
    completed_kept  INTEGER NOT NULL DEFAULT 0,
    cancelled_age   INTEGER CHECK (cancelled_age IS NULL OR cancelled_age >= 0),
    cancelled_count INTEGER CHECK (cancelled_count IS NULL OR cancelled_count >= 0),
    cancelled_kept  INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

-- One row per kept item: no longer in leaseq_items (so not in stats, peek,
-- item, the queue listing or the dedup index). `id` is the item's id, never
-- reused (leaseq_items is AUTOINCREMENT).
CREATE TABLE leaseq_finished (
    id          INTEGER PRIMARY KEY,
    queue       TEXT    NOT NULL,
    ending      TEXT    NOT NULL CHECK (ending IN ('completed', 'cancelled')),
    finished_at INTEGER NOT NULL,
    enqueued_at INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    payload     BLOB    NOT NULL,
    last_error  TEXT,
    result      BLOB    CHECK (result IS NULL OR length(result) <= 524288)
) STRICT;

-- Finish order per queue and ending: collection and trimming remove a
-- prefix; listing reads a suffix backwards.
CREATE INDEX leaseq_finished_order ON leaseq_finished (queue, ending, finished_at, id);

-- An ack (ack, ack_many, complete) deletes a Leased row: kept Completed, or
-- Cancelled when a cancel was requested, if the queue's policy keeps that
-- ending. BEFORE the delete, so the row (its payload) is read only when the
-- queue has a policy: a queue without one pays a probe of leaseq_retention.
-- A removal (remove_item) first moves its row out of Leased, so it records
-- nothing; purge deletes what its delete recorded.
CREATE TRIGGER leaseq_finished_on_ack BEFORE DELETE ON leaseq_items
WHEN OLD.state = 'leased'
 AND EXISTS (SELECT 1 FROM leaseq_retention WHERE queue = OLD.queue)
BEGIN
    INSERT INTO leaseq_finished
        (id, queue, ending, finished_at, enqueued_at, attempts, payload, last_error)
    SELECT i.id, i.queue, CASE i.cancel_requested WHEN 1 THEN 'cancelled' ELSE 'completed' END,
           CAST(round(unixepoch('subsec') * 1000) AS INTEGER),
           i.enqueued_at, i.attempts, i.payload, i.last_error
    FROM leaseq_items i JOIN leaseq_retention r ON r.queue = i.queue
    WHERE i.id = OLD.id AND i.payload IS NOT NULL
      AND CASE i.cancel_requested
            WHEN 1 THEN coalesce(r.cancelled_count, 1) > 0 AND coalesce(r.cancelled_age, 1) > 0
            ELSE coalesce(r.completed_count, 1) > 0 AND coalesce(r.completed_age, 1) > 0
          END;
END;

-- Every other ending is a cancel: the row leaves Leased (release,
-- give_back, fail, snooze, reap) or is cancelled while not Leased. Kept
-- Cancelled as it was before the statement (attempts, last error), then
-- deleted, as migration 0015's trigger did.
DROP TRIGGER leaseq_cancelled_end;
CREATE TRIGGER leaseq_cancelled_end AFTER UPDATE OF state, cancel_requested ON leaseq_items
WHEN NEW.cancel_requested = 1 AND NEW.state <> 'leased'
BEGIN
    INSERT INTO leaseq_finished
        (id, queue, ending, finished_at, enqueued_at, attempts, payload, last_error)
    SELECT OLD.id, OLD.queue, 'cancelled', CAST(round(unixepoch('subsec') * 1000) AS INTEGER),
           OLD.enqueued_at, OLD.attempts, OLD.payload, OLD.last_error
    FROM leaseq_retention r
    WHERE r.queue = OLD.queue AND OLD.payload IS NOT NULL
      AND coalesce(r.cancelled_count, 1) > 0 AND coalesce(r.cancelled_age, 1) > 0;
    DELETE FROM leaseq_items WHERE id = NEW.id;
END;

-- Counts each kept item, and trims its ending to the count bound at once:
-- the oldest go, through the order index.
CREATE TRIGGER leaseq_finished_counted AFTER INSERT ON leaseq_finished
BEGIN
    UPDATE leaseq_retention
    SET completed_kept = completed_kept + (NEW.ending = 'completed'),
        cancelled_kept = cancelled_kept + (NEW.ending = 'cancelled')
    WHERE queue = NEW.queue;
    DELETE FROM leaseq_finished WHERE id IN (
        SELECT f.id FROM leaseq_finished f
        WHERE f.queue = NEW.queue AND f.ending = NEW.ending
        ORDER BY f.finished_at, f.id
        LIMIT coalesce((
            SELECT max(0, CASE NEW.ending
                WHEN 'completed' THEN r.completed_kept - coalesce(r.completed_count, r.completed_kept)
                ELSE r.cancelled_kept - coalesce(r.cancelled_count, r.cancelled_kept) END)
            FROM leaseq_retention r WHERE r.queue = NEW.queue), 0));
END;

-- Uncounts each kept item removed (trim, collect, purge, set_retention).
CREATE TRIGGER leaseq_finished_uncounted AFTER DELETE ON leaseq_finished
BEGIN
    UPDATE leaseq_retention
    SET completed_kept = completed_kept - (OLD.ending = 'completed'),
        cancelled_kept = cancelled_kept - (OLD.ending = 'cancelled')
    WHERE queue = OLD.queue;
END;
