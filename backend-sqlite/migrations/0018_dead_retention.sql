-- A bound on dead letters (Retention::dead): its age (ns) and count in the
-- queue's policy row (NULL: no bound, the default), and a count of each
-- queue's dead letters, so that collect removes the oldest beyond the
-- count bound without counting them: it costs what it removes.

ALTER TABLE leaseq_retention ADD COLUMN dead_age INTEGER
    CHECK (dead_age IS NULL OR dead_age >= 0);
ALTER TABLE leaseq_retention ADD COLUMN dead_count INTEGER
    CHECK (dead_count IS NULL OR dead_count >= 0);

-- Dead letters per queue, kept by the triggers below in the statement that
-- moves a row into or out of Dead (fail, an exhausted release, the reap of
-- a final attempt, quarantine; redrive, removal, purge, collect).
ALTER TABLE leaseq_queue_counts ADD COLUMN dead INTEGER NOT NULL DEFAULT 0;
INSERT INTO leaseq_queue_counts (queue, dead)
    SELECT queue, count(*) FROM leaseq_items WHERE state = 'dead' GROUP BY queue
    ON CONFLICT (queue) DO UPDATE SET dead = excluded.dead;

-- Into or out of Dead by an update. A claim also updates `state`: its rows
-- leave Ready or Scheduled for Leased, and the WHEN clause is all it pays.
CREATE TRIGGER leaseq_dead_counted AFTER UPDATE OF state ON leaseq_items
WHEN (OLD.state = 'dead') <> (NEW.state = 'dead')
BEGIN
    INSERT INTO leaseq_queue_counts (queue, dead)
    VALUES (NEW.queue, CASE NEW.state WHEN 'dead' THEN 1 ELSE -1 END)
    ON CONFLICT (queue) DO UPDATE SET dead = dead + excluded.dead;
END;

-- Out of Dead by a delete, and the completions of 0017, in one trigger: an
-- ack pays one WHEN clause for both.
DROP TRIGGER leaseq_completion_counted;
CREATE TRIGGER leaseq_counted_on_delete AFTER DELETE ON leaseq_items
WHEN (OLD.state = 'leased' AND OLD.cancel_requested = 0) OR OLD.state = 'dead'
BEGIN
    INSERT INTO leaseq_queue_counts (queue, completed, dead)
    VALUES (OLD.queue, OLD.state = 'leased', -(OLD.state = 'dead'))
    ON CONFLICT (queue) DO UPDATE SET completed = completed + excluded.completed,
        dead = dead + excluded.dead;
END;

-- Only an ack holds a unique-for key: the delete of a Leased row. Any other
-- delete (a dead letter collected, a removal) frees the key at once.
DROP TRIGGER leaseq_hold_after_ack;
CREATE TRIGGER leaseq_hold_after_ack AFTER DELETE ON leaseq_items
WHEN OLD.state = 'leased' AND OLD.cancel_requested = 0
 AND OLD.unique_for_ms IS NOT NULL AND OLD.dedup_key IS NOT NULL
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
