//! The statements of [`leaseq_core::History`]. Endings are recorded by the
//! triggers of migration 0016 inside the statement that ends the item;
//! these read, trim and collect what they kept.

use crate::sql::now;

/// `?1` queue. The policy row: the age (ns) and count bounds of completed
/// items, cancelled items and dead letters.
pub(crate) const RETENTION: &str = "SELECT completed_age, completed_count, \
     cancelled_age, cancelled_count, dead_age, dead_count \
     FROM leaseq_retention WHERE queue = ?1";

/// `?1` queue, `?2`..`?7` completed age (ns), count, cancelled age, count,
/// dead age, count. Keeps the kept counters of an existing row.
pub(crate) const SET_RETENTION: &str = "INSERT INTO leaseq_retention \
     (queue, completed_age, completed_count, cancelled_age, cancelled_count, \
      dead_age, dead_count) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
     ON CONFLICT (queue) DO UPDATE SET completed_age = excluded.completed_age, \
       completed_count = excluded.completed_count, cancelled_age = excluded.cancelled_age, \
       cancelled_count = excluded.cancelled_count, dead_age = excluded.dead_age, \
       dead_count = excluded.dead_count";

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

/// `?1` queue, `?2` count bound, `?3` batch. Up to a batch of the oldest
/// dead letters beyond the count bound, by the queue's dead-letter counter
/// (migration 0018): a prefix of the dead index, so the cost follows what
/// is removed. A deleted row frees its dedup key and holds none (only an
/// ack holds one).
pub(crate) const COLLECT_DEAD_COUNT: &str = "DELETE FROM leaseq_items WHERE id IN (\
     SELECT id FROM leaseq_items WHERE queue = ?1 AND state = 'dead' \
     ORDER BY dead_at, id \
     LIMIT min(?3, coalesce((SELECT max(0, dead - ?2) FROM leaseq_queue_counts \
       WHERE queue = ?1), 0)))";

/// `?1` queue, `?2` age (ms), `?3` batch. Up to a batch of the dead letters
/// that died `age` or longer ago: a prefix of the dead index.
pub(crate) const COLLECT_DEAD_AGED: &str = concat!(
    "DELETE FROM leaseq_items WHERE id IN (",
    "SELECT id FROM leaseq_items WHERE queue = ?1 AND state = 'dead' AND dead_at <= ",
    now!(),
    " - ?2 ORDER BY dead_at, id LIMIT ?3)"
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

    #[tokio::test]
    async fn the_dead_letter_counter_starts_from_the_rows_a_file_holds() {
        use sqlx::{Connection, SqliteConnection};
        let mut conn = SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("open");
        let migrations = crate::backend::migrator().iter();
        let (before, after): (Vec<_>, Vec<_>) = migrations.partition(|m| m.version < 18);
        for m in before {
            sqlx::raw_sql(&m.sql)
                .execute(&mut conn)
                .await
                .expect("migrate");
        }
        sqlx::raw_sql(
            "INSERT INTO leaseq_items (queue, state, payload, max_attempts, enqueued_at, \
               available_at, dead_at) VALUES \
             ('a', 'dead', x'', 1, 0, 0, 1), ('a', 'dead', x'', 1, 0, 0, 2), \
             ('a', 'ready', x'', 1, 0, 0, NULL), ('b', 'dead', x'', 1, 0, 0, 3); \
             INSERT INTO leaseq_queue_counts (queue, completed) VALUES ('b', 7)",
        )
        .execute(&mut conn)
        .await
        .expect("rows before the migration");
        for m in after {
            sqlx::raw_sql(&m.sql)
                .execute(&mut conn)
                .await
                .expect("migrate");
        }
        let counts: Vec<(String, i64, i64)> =
            sqlx::query_as("SELECT queue, completed, dead FROM leaseq_queue_counts ORDER BY queue")
                .fetch_all(&mut conn)
                .await
                .expect("counts");
        assert_eq!(counts, [("a".into(), 0, 2), ("b".into(), 7, 1)]);
    }

    #[tokio::test]
    async fn dead_letters_are_collected_through_the_dead_index() {
        for (text, range) in [
            (super::COLLECT_DEAD_COUNT, "(queue=?)"),
            (super::COLLECT_DEAD_AGED, "(queue=? AND dead_at<?)"),
        ] {
            let p = plan(text).await;
            let want = format!("leaseq_items_dead {range}");
            assert!(p.contains(&want), "{text}\nexpected {want}:\n{p}");
            crate::sql::tests::no_full_scan(&p);
            assert!(!p.contains("TEMP B-TREE"), "{text}\n{p}");
        }
    }
}
