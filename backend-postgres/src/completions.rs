//! The completion counter ([`leaseq_core::QueueStats::completed`]): rows of
//! `leaseq_completions` (migration 0017), a few stripes per queue, added to
//! by the statements that complete items and summed by `stats`.

/// Stripes per queue: a statement adds to the stripe of its server process,
/// so acks on different pool connections seldom wait on one row's lock.
pub(crate) const STRIPES: u32 = 16;

/// The counter table of `schema`.
pub(crate) fn table(schema: &str) -> String {
    format!("\"{schema}\".leaseq_completions")
}

/// The CTE (`counted`) that adds the completed rows of `from` (a CTE of
/// deleted items with `queue` and `cancel_requested`: a row with a cancel
/// request ended Cancelled) to their queues' counters. Queues are upserted
/// in name order, so two statements acking the same queues take the row
/// locks in one order.
pub(crate) fn counted(schema: &str, from: &str) -> String {
    let c = table(schema);
    format!(
        "counted AS ( \
           INSERT INTO {c} AS c (queue, slot, n) \
           SELECT queue, (pg_backend_pid() % {STRIPES})::smallint, count(*) FROM {from} \
           WHERE NOT cancel_requested GROUP BY queue ORDER BY queue \
           ON CONFLICT (queue, slot) DO UPDATE SET n = c.n + EXCLUDED.n \
         )"
    )
}

/// The count of queue `$1`, as a scalar subquery.
pub(crate) fn total(schema: &str) -> String {
    format!(
        "(SELECT coalesce(sum(n), 0)::bigint FROM {} WHERE queue = $1)",
        table(schema)
    )
}
