//! The statements of [`leaseq_core::History`]. Endings are recorded by the
//! triggers of migration 0016 inside the statement that ends the item;
//! these read, trim and collect what they kept.

use crate::sql::now;

/// `?1` queue. The policy row: per ending its age (ns), count and kept.
pub(crate) const RETENTION: &str = "SELECT completed_age, completed_count, \
     cancelled_age, cancelled_count FROM leaseq_retention WHERE queue = ?1";

/// `?1` queue, `?2`..`?5` completed age (ns), count, cancelled age, count.
/// Keeps the kept counters of an existing row.
pub(crate) const SET_RETENTION: &str = "INSERT INTO leaseq_retention \
     (queue, completed_age, completed_count, cancelled_age, cancelled_count) \
     VALUES (?1, ?2, ?3, ?4, ?5) \
     ON CONFLICT (queue) DO UPDATE SET completed_age = excluded.completed_age, \
       completed_count = excluded.completed_count, cancelled_age = excluded.cancelled_age, \
       cancelled_count = excluded.cancelled_count";

/// `?1` queue. The default policy keeps nothing: no row.
pub(crate) const FORGET_RETENTION: &str = "DELETE FROM leaseq_retention WHERE queue = ?1";

/// `?1` queue. Every kept item of the queue.
pub(crate) const FORGET_FINISHED: &str = "DELETE FROM leaseq_finished WHERE queue = ?1";

/// `?1` queue, `?2` ending. The oldest of `ending` beyond the count bound,
/// by the row's kept counter: a prefix of the order index.
pub(crate) const TRIM: &str = "DELETE FROM leaseq_finished WHERE id IN (\
     SELECT f.id FROM leaseq_finished f WHERE f.queue = ?1 AND f.ending = ?2 \
     ORDER BY f.finished_at, f.id \
     LIMIT coalesce((SELECT max(0, CASE ?2 \
         WHEN 'completed' THEN r.completed_kept - coalesce(r.completed_count, r.completed_kept) \
         ELSE r.cancelled_kept - coalesce(r.cancelled_count, r.cancelled_kept) END) \
       FROM leaseq_retention r WHERE r.queue = ?1), 0))";

/// `?1` queue, `?2` ending, `?3` age (ms), `?4` batch. Up to a batch of
/// `ending`'s items that finished `age` or longer ago: a prefix of the
/// order index, so the cost follows what is removed.
pub(crate) const COLLECT: &str = concat!(
    "DELETE FROM leaseq_finished WHERE id IN (",
    "SELECT id FROM leaseq_finished WHERE queue = ?1 AND ending = ?2 AND finished_at <= ",
    now!(),
    " - ?3 ORDER BY finished_at, id LIMIT ?4)"
);

/// `?1` id, `?2` result. Run in `complete`'s transaction after its ack:
/// the ack's trigger kept the item Completed if the policy keeps it.
pub(crate) const SET_RESULT: &str =
    "UPDATE leaseq_finished SET result = ?2 WHERE id = ?1 AND ending = 'completed'";

/// The columns of a kept item, in [`crate::history`]'s decoding order.
macro_rules! finished_cols {
    () => {
        "id, ending, finished_at, enqueued_at, attempts, payload, last_error, result"
    };
}

/// `?1` queue, `?2` id.
pub(crate) const FINISHED_ITEM: &str = concat!(
    "SELECT ",
    finished_cols!(),
    " FROM leaseq_finished WHERE id = ?2 AND queue = ?1"
);

/// `?1` queue, `?2` ending, `?3` limit. Newest first, backwards through the
/// order index.
pub(crate) const FINISHED_OF: &str = concat!(
    "SELECT ",
    finished_cols!(),
    " FROM leaseq_finished WHERE queue = ?1 AND ending = ?2 ",
    "ORDER BY finished_at DESC, id DESC LIMIT ?3"
);

/// `?1` queue, `?2` limit. Newest first over both endings: each ending's
/// newest through the order index, merged.
pub(crate) const FINISHED_ALL: &str = concat!(
    "SELECT * FROM (SELECT ",
    finished_cols!(),
    " FROM leaseq_finished WHERE queue = ?1 AND ending = 'completed' ",
    "ORDER BY finished_at DESC, id DESC LIMIT ?2) ",
    "UNION ALL SELECT * FROM (SELECT ",
    finished_cols!(),
    " FROM leaseq_finished WHERE queue = ?1 AND ending = 'cancelled' ",
    "ORDER BY finished_at DESC, id DESC LIMIT ?2) ",
    "ORDER BY finished_at DESC, id DESC LIMIT ?2"
);

#[cfg(test)]
mod tests {
    use crate::sql::tests::plan;

    #[tokio::test]
    async fn collection_and_listing_walk_the_order_index() {
        for text in [
            super::COLLECT,
            super::TRIM,
            super::FINISHED_OF,
            super::FINISHED_ALL,
        ] {
            let p = plan(text).await;
            assert!(p.contains("leaseq_finished_order"), "{text}\n{p}");
            assert!(!p.contains("SCAN leaseq_finished"), "{text}\n{p}");
        }
    }
}
