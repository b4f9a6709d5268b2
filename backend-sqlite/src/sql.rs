//! The SQL of every operation.
//!
//! Each transition is one statement (or, where several statements must
//! agree, one `BEGIN IMMEDIATE` transaction). Time is always SQLite's own
//! clock, read by [`now!`] inside the statement: SQLite fixes `'now'` for
//! the whole of one statement, so every row a statement touches sees one
//! instant.

/// SQLite's clock as epoch milliseconds: the one clock that judges leases.
macro_rules! now {
    () => {
        "CAST(round(unixepoch('subsec') * 1000) AS INTEGER)"
    };
}
pub(crate) use now;

/// The largest attempt counter the schema holds (`i32::MAX`): a claim
/// cannot add one to it.
macro_rules! attempts_limit {
    () => {
        "2147483647"
    };
}
pub(crate) use attempts_limit;

/// A row a claim may lease.
macro_rules! healthy {
    () => {
        concat!("payload IS NOT NULL AND attempts < ", attempts_limit!())
    };
}

/// The predicate of the poison index, word for word, so the planner uses it.
macro_rules! poison {
    () => {
        concat!("(payload IS NULL OR attempts = ", attempts_limit!(), ")")
    };
}

/// A held lease: `?1` id, `?2` queue, `?3` token. A token and an expiry
/// mean Leased, by the table's `leaseq_items_lease_fields` check.
macro_rules! fence {
    () => {
        "id = ?1 AND queue = ?2 AND token = ?3 AND lease_expires_at IS NOT NULL"
    };
}
pub(crate) use fence;

/// An item's effective state: a due Scheduled item is Ready.
macro_rules! effective_state {
    () => {
        concat!(
            "CASE WHEN state = 'scheduled' AND available_at <= ",
            now!(),
            " THEN 'ready' ELSE state END"
        )
    };
}
pub(crate) use effective_state;

/// The inspection columns: id, effective state, payload, priority,
/// attempts, max attempts, dedup key, due time (ms), last error, enqueue
/// time (ms), progress (only the current lease's: it is stored with the
/// token that wrote it), cancel requested.
macro_rules! info {
    () => {
        concat!(
            "id, ",
            effective_state!(),
            ", payload, priority, attempts, max_attempts, dedup_key, \
             CASE WHEN state = 'scheduled' AND available_at > ",
            now!(),
            " THEN available_at WHEN state = 'leased' THEN lease_expires_at END, last_error, \
             enqueued_at, CASE WHEN state = 'leased' AND progress_token = token THEN progress END, \
             state = 'leased' AND cancel_requested = 1"
        )
    };
}

/// `last_error` of a row quarantined because its attempt counter is at
/// its limit.
pub(crate) const QUARANTINED: &str = "quarantined: attempt counter at its limit";

/// The backend's clock.
pub(crate) const NOW: &str = concat!("SELECT ", now!());

/// The backend's clock as an expression (epoch ms).
pub(crate) const NOW_MS: &str = now!();

/// `?1` queue, `?2` max, `?3` ttl (ms), `?4` the tokens, 16 bytes each in
/// slot order. The Ready head and the due Scheduled head, each read through
/// its own index, are merged in claim order and the first `?2` leased; the
/// n-th gets the n-th token. Poison rows (found through the poison index)
/// are touched without a change, so they come back with their state and
/// the caller moves them aside; they take no slot.
///
/// `?5`: NULL for a plain claim, which leases nothing on a queue that has
/// limits (the caller then claims under them, src/limits.rs); or the clock
/// (ms) the caller judged the limits by inside its transaction, which
/// stamps the leases.
pub(crate) const CLAIM: &str = concat!(
    "WITH head AS (",
    "  SELECT id, priority FROM leaseq_items",
    "  WHERE queue = ?1 AND state = 'ready' AND ",
    healthy!(),
    "  ORDER BY priority DESC, id LIMIT ?2",
    "), due AS (",
    "  SELECT id, priority FROM leaseq_items",
    "  WHERE queue = ?1 AND state = 'scheduled' AND available_at <= ",
    now!(),
    "    AND ",
    healthy!(),
    "  ORDER BY priority DESC, id LIMIT ?2",
    "), pick AS (",
    "  SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS slot",
    "  FROM (SELECT * FROM head UNION ALL SELECT * FROM due)",
    "  WHERE ?5 IS NOT NULL",
    "     OR NOT EXISTS (SELECT 1 FROM leaseq_queue_limits WHERE queue = ?1)",
    "  ORDER BY priority DESC, id LIMIT ?2",
    "), bad_ready AS (",
    "  SELECT id FROM leaseq_items INDEXED BY leaseq_items_poison",
    "  WHERE queue = ?1 AND state = 'ready' AND ",
    poison!(),
    "  LIMIT 1000",
    "), bad_due AS (",
    "  SELECT id FROM leaseq_items INDEXED BY leaseq_items_poison",
    "  WHERE queue = ?1 AND state = 'scheduled' AND ",
    poison!(),
    "    AND available_at <= ",
    now!(),
    "  LIMIT 1000",
    "), hit AS (",
    "  SELECT id, slot FROM pick",
    "  UNION ALL SELECT id, NULL FROM bad_ready",
    "  UNION ALL SELECT id, NULL FROM bad_due",
    ") ",
    "UPDATE leaseq_items SET ",
    "  state = CASE WHEN hit.slot IS NULL THEN state ELSE 'leased' END,",
    "  token = CASE WHEN hit.slot IS NULL THEN token",
    "          ELSE substr(?4, (hit.slot - 1) * 16 + 1, 16) END,",
    "  attempts = CASE WHEN hit.slot IS NULL THEN attempts ELSE attempts + 1 END,",
    "  lease_expires_at = CASE WHEN hit.slot IS NULL THEN lease_expires_at",
    "                     ELSE coalesce(?5, ",
    now!(),
    ") + ?3 END ",
    "FROM hit WHERE leaseq_items.id = hit.id ",
    "RETURNING id, state, token, payload, attempts, max_attempts, priority, lease_expires_at, ",
    "  enqueued_at"
);

/// `?1` queue, `?2` the ids a claim found poisoned (a JSON array). Deletes
/// those without a payload that are still Ready or Scheduled.
pub(crate) const DROP_MISSING: &str = "DELETE FROM leaseq_items \
     WHERE queue = ?1 AND id IN (SELECT value FROM json_each(?2)) \
       AND payload IS NULL AND state IN ('ready', 'scheduled') \
     RETURNING id, state";

/// `?1` queue, `?2` the ids a claim found poisoned (a JSON array). Moves
/// those whose attempt counter is at its limit to Dead.
pub(crate) const QUARANTINE: &str = concat!(
    "UPDATE leaseq_items SET state = 'dead', dead_at = ",
    now!(),
    ", last_error = 'quarantined: attempt counter at its limit', ",
    "token = NULL, lease_expires_at = NULL ",
    "WHERE queue = ?1 AND id IN (SELECT value FROM json_each(?2)) ",
    "AND payload IS NOT NULL AND attempts = ",
    attempts_limit!(),
    " AND state IN ('ready', 'scheduled') RETURNING id"
);

/// `?1` queue, `?2` and `?3` the first and last token of the claim's
/// family (16-byte blobs compare as the u128 they hold, so the family is
/// one range), `?4` the claim's ttl (ms). Every lease of the family, its
/// expiry renewed to now + ttl when it had passed (no reap took it, or the
/// token would not hold the item). In no order: the caller sorts by token
/// (slot order).
pub(crate) const RECOVER_CLAIM: &str = concat!(
    "UPDATE leaseq_items SET lease_expires_at = CASE WHEN lease_expires_at <= ",
    now!(),
    " THEN ",
    now!(),
    " + ?4 ELSE lease_expires_at END ",
    "WHERE queue = ?1 AND state = 'leased' AND token BETWEEN ?2 AND ?3 AND payload IS NOT NULL ",
    "RETURNING id, state, token, payload, attempts, max_attempts, priority, lease_expires_at, ",
    "  enqueued_at"
);

/// `?1` id, `?2` queue, `?3` token, `?4` held until (ms), `?5` the
/// traces' memory (ms). One row always: the fate and the item's effective
/// state (NULL when it is gone). Past `held_until` a takeover trace says a
/// reap took the lease (a claim that leases an item under a token drops the
/// trace an earlier lease under that token left, by the trigger of
/// migration 0014: a claim sent again reuses its tokens); none, within the
/// memory, says its own call ended it (a trace older than the memory is
/// still true: not filtered by age).
pub(crate) const LEASE_FATE: &str = concat!(
    "SELECT CASE WHEN i.state = 'leased' AND i.token = ?3 THEN 'held' ",
    "WHEN ",
    now!(),
    " < ?4 THEN 'finished' ",
    "WHEN EXISTS (SELECT 1 FROM leaseq_takeovers WHERE id = ?1 AND token = ?3) THEN 'lost' ",
    "WHEN ",
    now!(),
    " - ?5 < ?4 THEN 'finished' ELSE 'lost' END, ",
    "CASE WHEN i.state = 'scheduled' AND i.available_at <= ",
    now!(),
    " THEN 'ready' ELSE i.state END ",
    "FROM (SELECT 1) AS one LEFT JOIN leaseq_items i ",
    "ON i.id = ?1 AND i.queue = ?2 AND i.payload IS NOT NULL"
);

/// `?1` queue, `?2` request. The stored results, while remembered.
pub(crate) const REQUEST_GET: &str = concat!(
    "SELECT results FROM leaseq_requests WHERE queue = ?1 AND request = ?2 AND expires_at > ",
    now!()
);

/// `?1` queue, `?2` request, `?3` results, `?4` memory (ms). Replaces a
/// row whose memory ran out.
pub(crate) const REQUEST_PUT: &str = concat!(
    "INSERT OR REPLACE INTO leaseq_requests (queue, request, results, expires_at) ",
    "VALUES (?1, ?2, ?3, ",
    now!(),
    " + ?4)"
);

/// `?1` queue, `?2` batch. Through the expiry index.
pub(crate) const REAP_REQUESTS: &str = concat!(
    "DELETE FROM leaseq_requests WHERE rowid IN (",
    "SELECT rowid FROM leaseq_requests WHERE queue = ?1 AND expires_at <= ",
    now!(),
    " ORDER BY expires_at LIMIT ?2)"
);

/// A statement that ends a lease (`?1` id, `?2` queue, `?3` token), in two
/// forms: `plain`, and `returning`, the same returning `cancel_requested`
/// for the event a write on a watched queue sends ([`crate::events`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeaseEnd {
    /// Returns nothing: the rows affected say whether the fence held.
    pub(crate) plain: &'static str,
    /// Returns `cancel_requested` when the fence held.
    pub(crate) returning: &'static str,
}

/// A [`LeaseEnd`] of the statement text `$t`.
macro_rules! lease_end {
    ($($t:tt)+) => {
        LeaseEnd {
            plain: concat!($($t)+),
            returning: concat!($($t)+, " RETURNING cancel_requested"),
        }
    };
}

/// The ack: the row deleted (kept and counted by migrations 0016 and
/// 0017's triggers).
pub(crate) const ACK: LeaseEnd = lease_end!("DELETE FROM leaseq_items WHERE ", fence!());

/// ... `?4` ttl (ms). The new expiry, and whether a cancel was requested.
pub(crate) const EXTEND: &str = concat!(
    "UPDATE leaseq_items SET lease_expires_at = ",
    now!(),
    " + ?4 WHERE ",
    fence!(),
    " RETURNING lease_expires_at, cancel_requested"
);

/// ... `?4` delay (ms). The state the item went to, and whether a cancel
/// was requested (then the trigger `leaseq_cancelled_end` of migration 0015
/// deleted it in this statement).
pub(crate) const RELEASE: &str = concat!(
    "UPDATE leaseq_items SET ",
    "state = CASE WHEN attempts >= max_attempts THEN 'dead' ",
    "             WHEN ?4 > 0 THEN 'scheduled' ELSE 'ready' END, ",
    "available_at = ",
    now!(),
    " + ?4, ",
    "dead_at = CASE WHEN attempts >= max_attempts THEN ",
    now!(),
    " END, ",
    "last_error = CASE WHEN attempts >= max_attempts THEN 'attempts exhausted' ",
    "                  ELSE last_error END, ",
    "token = NULL, lease_expires_at = NULL, progress = NULL, progress_token = NULL WHERE ",
    fence!(),
    " RETURNING state, cancel_requested"
);

/// Back to Ready at its place (the Ready index orders by priority and id)
/// with the claim's attempt taken back (deleted instead when a cancel was
/// requested, by the trigger `leaseq_cancelled_end`).
pub(crate) const GIVE_BACK: LeaseEnd = lease_end!(
    "UPDATE leaseq_items SET state = 'ready', attempts = max(attempts - 1, 0), ",
    "available_at = ",
    now!(),
    ", token = NULL, lease_expires_at = NULL, progress = NULL, progress_token = NULL WHERE ",
    fence!()
);

/// ... `?4` reason. (A cancel-requested item is deleted instead, by the
/// trigger `leaseq_cancelled_end`.)
pub(crate) const FAIL: LeaseEnd = lease_end!(
    "UPDATE leaseq_items SET state = 'dead', dead_at = ",
    now!(),
    ", last_error = ?4, token = NULL, lease_expires_at = NULL, progress = NULL, ",
    "progress_token = NULL WHERE ",
    fence!()
);

/// `?1` queue, `?2` batch. The takeover traces of the oldest expired
/// leases, read as a prefix of the leased index (so the cost follows the
/// expired leases only); returns the clock it judged expiry by, for
/// [`REAP`] in the same transaction.
pub(crate) const TAKE_EXPIRED: &str = concat!(
    "INSERT OR REPLACE INTO leaseq_takeovers (id, token, queue, taken_at) ",
    "SELECT id, token, queue, ",
    now!(),
    " FROM leaseq_items WHERE queue = ?1 AND state = 'leased' AND lease_expires_at <= ",
    now!(),
    " ORDER BY lease_expires_at, id LIMIT ?2 RETURNING taken_at"
);

/// `?1` queue, `?2` batch, `?3` the clock [`TAKE_EXPIRED`] judged by, in
/// the same transaction (so the same leases). Back to Ready, or to Dead on
/// their final attempt; a cancel-requested item is deleted instead (the
/// trigger `leaseq_cancelled_end`), and comes back with its flag. The
/// progress goes: a claim sent again after a lost reply may lease the item
/// under the token the reaped lease had, and that new lease starts with
/// none. The
/// writer lock makes each batch see the last one's work: a lease is
/// recovered once. Returns each row's new state, cancel flag and id.
pub(crate) const REAP: &str = concat!(
    "UPDATE leaseq_items SET ",
    "state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'ready' END, ",
    "dead_at = CASE WHEN attempts >= max_attempts THEN ",
    now!(),
    " END, ",
    "last_error = CASE WHEN attempts >= max_attempts ",
    "                  THEN 'lease expired on final attempt' ELSE last_error END, ",
    "available_at = ",
    now!(),
    ", token = NULL, lease_expires_at = NULL, progress = NULL, progress_token = NULL ",
    "WHERE id IN (SELECT id FROM leaseq_items WHERE queue = ?1 AND state = 'leased' ",
    "AND lease_expires_at <= ?3 ORDER BY lease_expires_at, id LIMIT ?2) ",
    "RETURNING state, cancel_requested, id"
);

/// `?1` queue, `?2` the traces' memory (ms). Through the age index.
pub(crate) const FORGET_TAKEOVERS: &str = concat!(
    "DELETE FROM leaseq_takeovers WHERE queue = ?1 AND taken_at <= ",
    now!(),
    " - ?2"
);

/// `?1` queue, `?2` batch, `?3` the lease horizon in ms. Leases expiring
/// past the horizon (no claim or extend sets one; a clock that ran ahead
/// did) expire now, for the reap that follows to recover, read from the far
/// end of the leased index.
pub(crate) const LEASE_HORIZON: &str = concat!(
    "UPDATE leaseq_items SET lease_expires_at = ",
    now!(),
    " WHERE id IN (SELECT id FROM leaseq_items WHERE queue = ?1 AND state = 'leased' ",
    "AND lease_expires_at > ",
    now!(),
    " + ?3 ORDER BY lease_expires_at DESC, id LIMIT ?2) RETURNING id"
);

/// `?1` queue, `?2` batch. Due Scheduled items to Ready, through the
/// scheduled index.
pub(crate) const PROMOTE: &str = concat!(
    "UPDATE leaseq_items SET state = 'ready' ",
    "WHERE id IN (SELECT id FROM leaseq_items WHERE queue = ?1 AND state = 'scheduled' ",
    "AND available_at <= ",
    now!(),
    " ORDER BY available_at, id LIMIT ?2) RETURNING id"
);

/// `?1` queue, `?2` batch. The oldest deaths back to Ready, attempts reset.
pub(crate) const REDRIVE: &str = concat!(
    "UPDATE leaseq_items SET state = 'ready', attempts = 0, dead_at = NULL, available_at = ",
    now!(),
    " WHERE id IN (SELECT id FROM leaseq_items WHERE queue = ?1 AND state = 'dead' ",
    "ORDER BY dead_at, id LIMIT ?2) RETURNING id"
);

/// `?1` queue, `?2` id. The redrive of one row, found by its primary key,
/// only while it is Dead (a row without a payload is no item, as for
/// [`ITEM`]). Returns the id when it moved.
pub(crate) const REDRIVE_ITEM: &str = concat!(
    "UPDATE leaseq_items SET state = 'ready', attempts = 0, dead_at = NULL, available_at = ",
    now!(),
    " WHERE id = ?2 AND queue = ?1 AND state = 'dead' AND payload IS NOT NULL RETURNING id"
);

/// `?1` queue, `?2` id. Run just before [`REMOVE_ITEM`], in its
/// transaction: clears the row's unique-for hold, so the delete does not
/// fire `leaseq_hold_after_ack` (a removed item was not acked; its key is
/// free at once).
pub(crate) const REMOVE_ITEM_UNHOLD: &str = "UPDATE leaseq_items SET unique_for_ms = NULL \
     WHERE id = ?2 AND queue = ?1 AND unique_for_ms IS NOT NULL";

/// `?1` queue, `?2` id. Run after [`REMOVE_ITEM_UNHOLD`]: a Leased row
/// leaves Leased (and its cancel request goes), so the delete does not
/// fire `leaseq_finished_on_ack` (a removed item did not finish). Returns
/// the id when the row was Leased.
pub(crate) const REMOVE_ITEM_UNLEASE: &str = "UPDATE leaseq_items SET state = 'ready', \
     token = NULL, lease_expires_at = NULL, cancel_requested = 0 \
     WHERE id = ?2 AND queue = ?1 AND state = 'leased' AND payload IS NOT NULL RETURNING id";

/// `?1` queue, `?2` id. Deletes the row, found by its primary key, in any
/// state (a row without a payload is no item, as for [`ITEM`]); returns
/// its effective state, as [`ITEM`] shows it.
pub(crate) const REMOVE_ITEM: &str = concat!(
    "DELETE FROM leaseq_items WHERE id = ?2 AND queue = ?1 AND payload IS NOT NULL ",
    "RETURNING ",
    effective_state!()
);

/// `?1` queue. Each count through its own partial index; the pause from
/// the limits row; the completions from the counts row (migration 0017).
pub(crate) const STATS: &str = concat!(
    "SELECT ",
    "(SELECT count(*) FROM leaseq_items WHERE queue = ?1 AND state = 'ready' ",
    " AND payload IS NOT NULL) + ",
    "(SELECT count(*) FROM leaseq_items WHERE queue = ?1 AND state = 'scheduled' ",
    " AND available_at <= ",
    now!(),
    " AND payload IS NOT NULL), ",
    "(SELECT count(*) FROM leaseq_items WHERE queue = ?1 AND state = 'scheduled' ",
    " AND available_at > ",
    now!(),
    " AND payload IS NOT NULL), ",
    "(SELECT count(*) FROM leaseq_items WHERE queue = ?1 AND state = 'leased' ",
    " AND payload IS NOT NULL), ",
    "(SELECT count(*) FROM leaseq_items WHERE queue = ?1 AND state = 'dead' ",
    " AND payload IS NOT NULL), ",
    "coalesce((SELECT paused FROM leaseq_queue_limits WHERE queue = ?1), 0), ",
    "coalesce((SELECT completed FROM leaseq_queue_counts WHERE queue = ?1), 0)"
);

/// A walk over the queues of one state's partial index: each step seeks
/// the first queue after the last one found (`queue > `, the index's
/// leading column), so the walk costs one seek per queue of that state
/// whatever the queue's length. `$c` names the walk.
macro_rules! walk_queues {
    ($c:literal, $state:literal) => {
        concat!(
            $c,
            "(queue) AS (SELECT (SELECT queue FROM leaseq_items WHERE state = '",
            $state,
            "' AND payload IS NOT NULL ORDER BY queue LIMIT 1) UNION ALL ",
            "SELECT (SELECT i.queue FROM leaseq_items i WHERE i.state = '",
            $state,
            "' AND i.payload IS NOT NULL AND i.queue > ",
            $c,
            ".queue ORDER BY i.queue LIMIT 1) FROM ",
            $c,
            " WHERE ",
            $c,
            ".queue IS NOT NULL)"
        )
    };
}

/// The queues with a row in any state that `STATS` counts (payload
/// present), sorted: one walk per state's partial index, so the cost grows
/// with the number of queues, not of rows.
pub(crate) const QUEUES: &str = concat!(
    "WITH RECURSIVE ",
    walk_queues!("r", "ready"),
    ", ",
    walk_queues!("s", "scheduled"),
    ", ",
    walk_queues!("l", "leased"),
    ", ",
    walk_queues!("d", "dead"),
    " SELECT queue FROM r WHERE queue IS NOT NULL ",
    "UNION SELECT queue FROM s WHERE queue IS NOT NULL ",
    "UNION SELECT queue FROM l WHERE queue IS NOT NULL ",
    "UNION SELECT queue FROM d WHERE queue IS NOT NULL ",
    "ORDER BY queue"
);

/// Peek per state: `?1` queue, `?2` limit, in each state's index order.
pub(crate) const PEEK: [&str; 4] = [
    concat!(
        "SELECT * FROM (",
        "SELECT * FROM (SELECT ",
        info!(),
        " FROM leaseq_items WHERE queue = ?1 AND state = 'ready' AND payload IS NOT NULL ",
        "ORDER BY priority DESC, id LIMIT ?2) ",
        "UNION ALL SELECT * FROM (SELECT ",
        info!(),
        " FROM leaseq_items WHERE queue = ?1 AND state = 'scheduled' AND available_at <= ",
        now!(),
        " AND payload IS NOT NULL ORDER BY priority DESC, id LIMIT ?2)",
        ") ORDER BY priority DESC, id LIMIT ?2"
    ),
    concat!(
        "SELECT ",
        info!(),
        " FROM leaseq_items WHERE queue = ?1 AND state = 'scheduled' AND available_at > ",
        now!(),
        " AND payload IS NOT NULL ORDER BY available_at, id LIMIT ?2"
    ),
    concat!(
        "SELECT ",
        info!(),
        " FROM leaseq_items WHERE queue = ?1 AND state = 'leased' AND payload IS NOT NULL ",
        "ORDER BY lease_expires_at, id LIMIT ?2"
    ),
    concat!(
        "SELECT ",
        info!(),
        " FROM leaseq_items WHERE queue = ?1 AND state = 'dead' AND payload IS NOT NULL ",
        "ORDER BY dead_at, id LIMIT ?2"
    ),
];

/// `?1` queue, `?2` id.
pub(crate) const ITEM: &str = concat!(
    "SELECT ",
    info!(),
    " FROM leaseq_items WHERE id = ?2 AND queue = ?1 AND payload IS NOT NULL"
);

/// `?1` queue. Run just before [`PURGE`], in its transaction: the queue's
/// Leased rows leave Leased (their cancel requests go), so the delete is
/// no ack: it counts no completion, keeps nothing finished and holds no
/// key, as for [`REMOVE_ITEM_UNLEASE`].
pub(crate) const PURGE_UNLEASE: &str = "UPDATE leaseq_items SET state = 'ready', \
     token = NULL, lease_expires_at = NULL, cancel_requested = 0 \
     WHERE queue = ?1 AND state = 'leased'";

/// `?1` queue. Each state's rows through its own index (one OR term each).
pub(crate) const PURGE: &str = "DELETE FROM leaseq_items WHERE \
     (queue = ?1 AND state = 'ready') OR (queue = ?1 AND state = 'scheduled') \
     OR (queue = ?1 AND state = 'leased') OR (queue = ?1 AND state = 'dead')";

/// Items per insert statement: the core's largest batch in one statement.
pub(crate) const INSERT_CHUNK: usize = leaseq_core::limits::MAX_ENQUEUE_BATCH;

/// `?1` queue, `?2` a JSON array with one `[priority, max attempts, delay
/// (ms), dedup key or null, payload offset (1-based), payload length,
/// unique-for hold (ms) or null]` per
/// item, `?3` every payload, concatenated. Three parameters whatever the
/// batch's size: SQLite looks each parameter up by a linear scan, so a
/// statement with one parameter per field costs quadratic time to bind.
/// Rows go in by batch order (`j.key`, the array index) in one statement,
/// so their `AUTOINCREMENT` ids are consecutive and rise with it: the last
/// one (`last_insert_rowid`) names them all, and nothing comes back row by
/// row.
pub(crate) const INSERT: &str = concat!(
    "INSERT INTO leaseq_items (queue, state, priority, payload, max_attempts, dedup_key, ",
    "  enqueued_at, available_at, unique_for_ms) ",
    "SELECT ?1, CASE WHEN j.value ->> 2 > 0 THEN 'scheduled' ELSE 'ready' END, ",
    // An empty payload is an empty blob, never NULL (`substr` of nothing
    // and an empty parameter both give NULL).
    "  j.value ->> 0, CASE WHEN j.value ->> 5 = 0 THEN x'' ",
    "  ELSE substr(?3, j.value ->> 4, j.value ->> 5) END, j.value ->> 1, j.value ->> 3, ",
    "  n.t, n.t + (j.value ->> 2), j.value ->> 6 ",
    "FROM (SELECT ",
    now!(),
    " AS t) AS n, json_each(?2) AS j ORDER BY j.key"
);

pub(crate) fn dedup_holders(n: usize) -> String {
    // Numbered: sqlx counts unnumbered `?` from the first argument.
    let marks = (2..n + 2)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(",");
    // Holds first, live holders last: a live holder wins.
    format!(
        "SELECT dedup_key, id FROM leaseq_held_keys \
         WHERE queue = ?1 AND dedup_key IN ({marks}) AND held_until > {now} \
         UNION ALL \
         SELECT dedup_key, id FROM leaseq_items \
         WHERE queue = ?1 AND dedup_key IN ({marks}) AND dedup_key IS NOT NULL",
        now = now!(),
    )
}

/// `?1` a JSON array with one `[id, queue]` per lease, `?2` their tokens,
/// 16 bytes each in the same order: each row deleted when its own fence
/// holds; the rows deleted come back, with whether a cancel was requested
/// (for the events). Two parameters whatever the batch's size (see
/// [`INSERT`]).
pub(crate) const ACK_MANY: &str = "WITH l(id, queue, token) AS (\
       SELECT j.value ->> 0, j.value ->> 1, substr(?2, j.key * 16 + 1, 16) \
       FROM json_each(?1) AS j) \
     DELETE FROM leaseq_items WHERE id IN (\
       SELECT i.id FROM l JOIN leaseq_items i \
       ON i.id = l.id AND i.queue = l.queue AND i.token = l.token \
       AND i.lease_expires_at IS NOT NULL) \
     RETURNING id, queue, token, cancel_requested";

/// [`ACK_MANY`]'s parameters, and `?3` how many leases there are, each on
/// a row of its own: deletes every row of the batch if each lease's fence
/// holds, else nothing. A batch whose leases are all held (the common
/// case) is acked without a row coming back; otherwise the caller runs
/// [`ACK_MANY`] to find out which ones are.
pub(crate) const ACK_ALL: &str = "WITH l(id, queue, token) AS (\
       SELECT j.value ->> 0, j.value ->> 1, substr(?2, j.key * 16 + 1, 16) \
       FROM json_each(?1) AS j), \
     hit(id) AS (\
       SELECT i.id FROM l JOIN leaseq_items i \
       ON i.id = l.id AND i.queue = l.queue AND i.token = l.token \
       AND i.lease_expires_at IS NOT NULL) \
     DELETE FROM leaseq_items WHERE id IN (SELECT id FROM hit) \
       AND (SELECT count(*) FROM hit) = ?3";

/// `text` as a JSON string literal.
pub(crate) fn json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
pub(crate) mod tests {
    use sqlx::{Connection, Row, SqliteConnection};

    /// The query plan of `text` on a migrated in-memory database, one
    /// line per step.
    pub(crate) async fn plan(text: &str) -> String {
        let mut conn = SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("open");
        super::super::backend::migrator()
            .run(&mut conn)
            .await
            .expect("migrate");
        let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {text}"))
            .fetch_all(&mut conn)
            .await
            .expect("explain");
        // Indent each step under its parent.
        let mut depth = std::collections::HashMap::new();
        rows.iter()
            .map(|r| {
                let (id, parent) = (r.get::<i64, _>(0), r.get::<i64, _>(1));
                let d = depth.get(&parent).map_or(0, |d| d + 1);
                depth.insert(id, d);
                format!("{}{}", "  ".repeat(d), r.get::<String, _>(3))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Fails when `plan` reads the whole items table.
    pub(crate) fn no_full_scan(plan: &str) {
        assert!(
            !plan.lines().any(|l| l.trim() == "SCAN leaseq_items"),
            "{plan}"
        );
    }

    #[tokio::test]
    async fn json_strings_read_back_as_written() {
        let mut conn = SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("open");
        for text in [
            "plain",
            "qu\"ote",
            "back\\slash",
            "tab\tnl\n\u{1}",
            "ünï ✓",
            "",
        ] {
            let mut literal = String::new();
            super::json_string(text, &mut literal);
            let back: String = sqlx::query("SELECT json(?1) ->> '$'")
                .bind(&literal)
                .fetch_one(&mut conn)
                .await
                .expect("valid JSON")
                .get(0);
            assert_eq!(back, text, "{literal}");
        }
    }

    #[tokio::test]
    async fn claim_reads_only_the_heads_of_its_indexes() {
        let p = plan(super::CLAIM).await;
        for index in [
            "leaseq_items_ready",
            "leaseq_items_scheduled",
            "leaseq_items_poison",
        ] {
            assert!(p.contains(index), "{index} unused:\n{p}");
        }
        no_full_scan(&p);
    }

    #[tokio::test]
    async fn the_queue_listing_seeks_each_state_index_queue_by_queue() {
        let p = plan(super::QUEUES).await;
        for index in [
            "leaseq_items_ready",
            "leaseq_items_scheduled",
            "leaseq_items_leased",
            "leaseq_items_dead",
        ] {
            // Each step seeks past the last queue found, never reading the
            // rows of a queue one by one.
            let seek = format!("SEARCH i USING INDEX {index} (queue>?)");
            assert!(p.contains(&seek), "{seek} missing:\n{p}");
        }
        assert!(!p.contains("DISTINCT"), "{p}");
        no_full_scan(&p);
    }

    #[tokio::test]
    async fn every_statement_goes_through_an_index() {
        let cases: [(&str, &str); 18] = [
            (
                super::TAKE_EXPIRED,
                "leaseq_items_leased (queue=? AND lease_expires_at<?)",
            ),
            (
                super::REAP,
                "leaseq_items_leased (queue=? AND lease_expires_at<?)",
            ),
            (
                super::FORGET_TAKEOVERS,
                "leaseq_takeovers_age (queue=? AND taken_at<?)",
            ),
            (
                super::PROMOTE,
                "leaseq_items_scheduled (queue=? AND available_at<?)",
            ),
            (super::REDRIVE, "leaseq_items_dead (queue=?)"),
            (super::REDRIVE_ITEM, "INTEGER PRIMARY KEY"),
            (super::REMOVE_ITEM_UNHOLD, "INTEGER PRIMARY KEY"),
            (super::REMOVE_ITEM, "INTEGER PRIMARY KEY"),
            (super::STATS, "leaseq_items_leased (queue=?)"),
            (super::PURGE, "MULTI-INDEX OR"),
            (super::PURGE_UNLEASE, "leaseq_items_leased (queue=?)"),
            (super::ACK.plain, "INTEGER PRIMARY KEY"),
            (super::ACK.returning, "INTEGER PRIMARY KEY"),
            (super::ACK_MANY, "INTEGER PRIMARY KEY"),
            (super::ACK_ALL, "INTEGER PRIMARY KEY"),
            // Every lease of the queue: the call after a lost claim reply.
            (super::RECOVER_CLAIM, "leaseq_items_leased (queue=?)"),
            (
                super::REAP_REQUESTS,
                "leaseq_requests_expiry (queue=? AND expires_at<?)",
            ),
            (super::PEEK[0], "leaseq_items_ready (queue=?)"),
        ];
        for (text, expected) in cases {
            let p = plan(text).await;
            assert!(p.contains(expected), "{text}\nexpected {expected}:\n{p}");
            no_full_scan(&p);
        }
    }
}
