-- How many kept items each queue holds per ending (History), so that a
-- collect under a count bound reads how many are past it instead of
-- walking the bound's newest entries: it costs what it removes.
--
-- The statements that record kept items add to these rows in that same
-- statement, and the collects subtract what they delete, each in the
-- stripe of its server process (`pg_backend_pid()` modulo the stripes, as
-- leaseq_completions), so concurrent acks rarely wait on one row. A
-- stripe may go below zero (a collect subtracts in its own stripe); the
-- sum of a queue's stripes is its count. Purge and delete_queue delete
-- the rows with the items.
CREATE TABLE leaseq_kept_counts (
    queue  text     NOT NULL,
    ending text     NOT NULL,
    slot   smallint NOT NULL,
    n      bigint   NOT NULL,
    PRIMARY KEY (queue, ending, slot)
) WITH (fillfactor = 50);

INSERT INTO leaseq_kept_counts (queue, ending, slot, n)
SELECT queue, ending, 0, count(*) FROM leaseq_finished GROUP BY queue, ending;
