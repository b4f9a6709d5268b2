//! The statements of [`leaseq_core::Control`] and
//! [`leaseq_core::WorkerRegistry`]. Each is one statement: a cancel-requested
//! row that leaves Leased is deleted within it by the trigger
//! `leaseq_cancelled_end` (migration 0015).

use crate::sql::{effective_state, fence, now};

/// `?1` queue, `?2` id. Marks the item cancel-requested: a Leased row keeps
/// its lease; any other row is deleted at once by the trigger (and holds no
/// key). Returns the state the row was in (a due Scheduled item is Ready).
pub(crate) const CANCEL: &str = concat!(
    "UPDATE leaseq_items SET cancel_requested = 1 ",
    "WHERE id = ?2 AND queue = ?1 AND payload IS NOT NULL RETURNING ",
    effective_state!()
);

/// `?1` id, `?2` queue, `?3` token, `?4` delay (ms). To Scheduled (Ready
/// when the delay is zero) with the claim's attempt taken back, never Dead.
/// Returns the new state and whether a cancel was requested (then the row
/// is gone).
pub(crate) const SNOOZE: &str = concat!(
    "UPDATE leaseq_items SET state = CASE WHEN ?4 > 0 THEN 'scheduled' ELSE 'ready' END, ",
    "attempts = max(attempts - 1, 0), available_at = ",
    now!(),
    " + ?4, token = NULL, lease_expires_at = NULL, progress = NULL, progress_token = NULL ",
    "WHERE ",
    fence!(),
    " RETURNING state, cancel_requested"
);

/// `?1` queue, `?2` id. A Scheduled item not yet due, to Ready (its place
/// in the Ready index is its priority and id: claim order). Returns the id
/// when it moved.
pub(crate) const RUN_NOW: &str = concat!(
    "UPDATE leaseq_items SET state = 'ready', available_at = ",
    now!(),
    " WHERE id = ?2 AND queue = ?1 AND state = 'scheduled' AND available_at > ",
    now!(),
    " AND payload IS NOT NULL RETURNING id"
);

/// `?1` queue, `?2` batch. The earliest Scheduled items not yet due, to
/// Ready, through the scheduled index (the due ones, Ready already, are
/// its prefix and are skipped).
pub(crate) const RUN_ALL_NOW: &str = concat!(
    "UPDATE leaseq_items SET state = 'ready', available_at = ",
    now!(),
    " WHERE id IN (SELECT id FROM leaseq_items WHERE queue = ?1 AND state = 'scheduled' ",
    "AND available_at > ",
    now!(),
    " AND payload IS NOT NULL ORDER BY available_at, id LIMIT ?2) RETURNING id"
);

/// `?1` id, `?2` queue, `?3` token, `?4` the value. Stored with the token
/// that wrote it: shown only while that lease holds the item.
pub(crate) const PROGRESS: &str = concat!(
    "UPDATE leaseq_items SET progress = ?4, progress_token = token WHERE ",
    fence!(),
    " RETURNING id"
);

/// Expired worker entries, through the expiry index.
pub(crate) const SWEEP_WORKERS: &str =
    concat!("DELETE FROM leaseq_workers WHERE expires_at <= ", now!());

/// `?1` id, `?2` entry, `?3` ttl (ms). Returns the expiry.
pub(crate) const REGISTER: &str = concat!(
    "INSERT INTO leaseq_workers (id, entry, expires_at) VALUES (?1, ?2, ",
    now!(),
    " + ?3) ON CONFLICT (id) DO UPDATE SET entry = excluded.entry, ",
    "expires_at = excluded.expires_at RETURNING expires_at"
);

/// `?1` id.
pub(crate) const DEREGISTER: &str = "DELETE FROM leaseq_workers WHERE id = ?1";

/// The unexpired entries, by id.
pub(crate) const WORKERS: &str = concat!(
    "SELECT id, entry, expires_at FROM leaseq_workers WHERE expires_at > ",
    now!(),
    " ORDER BY id"
);

#[cfg(test)]
mod tests {
    use crate::sql::tests::{no_full_scan, plan};

    #[tokio::test]
    async fn every_statement_goes_through_an_index() {
        let cases: [(&str, &str); 6] = [
            (super::CANCEL, "INTEGER PRIMARY KEY"),
            (super::SNOOZE, "INTEGER PRIMARY KEY"),
            (super::RUN_NOW, "INTEGER PRIMARY KEY"),
            (
                super::RUN_ALL_NOW,
                "leaseq_items_scheduled (queue=? AND available_at>?)",
            ),
            (super::PROGRESS, "INTEGER PRIMARY KEY"),
            (super::SWEEP_WORKERS, "leaseq_workers_expiry (expires_at<?)"),
        ];
        for (text, expected) in cases {
            let p = plan(text).await;
            assert!(p.contains(expected), "{text}\nexpected {expected}:\n{p}");
            no_full_scan(&p);
        }
    }
}
