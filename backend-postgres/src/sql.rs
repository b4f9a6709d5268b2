//! The SQL of every operation, rendered once per backend with its schema.
//!
//! Each transition is one statement. Time is always the server's `now()`.
//! `$n * interval '1 millisecond'` turns a millisecond count into an interval.

use crate::events::{wire, Gate};
use crate::history::{finished_table, record, retention_table};
use crate::rows::ms;

/// The largest attempt counter the `integer` column holds: a claim cannot
/// add one to it.
pub(crate) const ATTEMPTS_LIMIT: &str = "2147483647";

/// `last_error` of a row quarantined because its attempt counter is at
/// [`ATTEMPTS_LIMIT`].
pub(crate) const QUARANTINED: &str = "quarantined: attempt counter at its limit";

/// The first key of a keyset walk over a `(timestamptz, id)` index: every
/// row comes after it. See [`Sql::reap`].
pub(crate) const WALK_START: (&str, i64) = ("-infinity", 0);

/// Every statement the backend runs, with the table and sequence names of
/// one schema filled in.
#[derive(Debug)]
pub(crate) struct Sql {
    pub(crate) enqueue: String,
    pub(crate) enqueue_plain: String,
    pub(crate) dedup_holders: String,
    pub(crate) claim: String,
    pub(crate) recover_claim: String,
    pub(crate) lease_fate: String,
    pub(crate) request_begin: String,
    pub(crate) request_done: String,
    pub(crate) reap_requests: String,
    pub(crate) ack: String,
    /// The ack with a result: [`leaseq_core::History::complete`].
    pub(crate) complete: String,
    pub(crate) ack_many: String,
    pub(crate) extend: String,
    pub(crate) release: String,
    pub(crate) give_back: String,
    pub(crate) fail: String,
    pub(crate) snooze: String,
    pub(crate) progress: String,
    pub(crate) reap: String,
    pub(crate) forget_takeovers: String,
    pub(crate) lease_horizon: String,
    pub(crate) promote: String,
    pub(crate) stats: String,
    pub(crate) stats_sample: String,
    pub(crate) queues: String,
    pub(crate) peek: [String; 4],
    pub(crate) item: String,
    pub(crate) redrive: String,
    pub(crate) redrive_item: String,
    pub(crate) remove_item: String,
    pub(crate) purge: String,
    pub(crate) delete_queue: String,
    /// The items table, schema-qualified.
    pub(crate) items_table: String,
}

/// The columns and effective state inspection returns. A lease's
/// progress shows only while the row is Leased under the token that wrote
/// it, so no claim has to clear it.
fn info_columns() -> String {
    format!(
        "id, CASE WHEN state = 'scheduled' AND available_at <= now() THEN 'ready' ELSE state END \
         AS state, payload, priority, attempts, max_attempts, dedup_key, \
         CASE WHEN state = 'scheduled' AND available_at > now() THEN {avail} \
              WHEN state = 'leased' THEN {lease} END AS due_ms, last_error, \
         {enq} AS enqueued_ms, \
         CASE WHEN state = 'leased' AND progress_token = token THEN progress END AS progress, \
         (state = 'leased' AND cancel_requested) AS cancel_requested",
        avail = ms("available_at"),
        lease = ms("lease_expires_at"),
        enq = ms("enqueued_at"),
    )
}

/// The queues with a row that `stats` counts (payload present), in any
/// state: one walk per state's partial index, each step the first queue
/// after the last one found (`queue >`, the index's leading column, then
/// `LIMIT 1`), so the cost grows with the number of queues, not of rows
/// (a loose index scan; `SELECT DISTINCT` reads every row). In no set
/// order: the caller sorts by name.
fn queues(t: &str) -> String {
    // The step is a LATERAL join rather than a scalar subquery: the same
    // plan, but EXPLAIN shows it (a subplan in the work table's output is
    // left out), so a test can check the seek.
    let walk = |c: &str, state: &str| {
        format!(
            "{c}(queue) AS ( \
               (SELECT queue FROM {t} WHERE state = '{state}' AND payload IS NOT NULL \
                ORDER BY queue LIMIT 1) \
               UNION ALL \
               SELECT n.queue FROM {c} CROSS JOIN LATERAL ( \
                 SELECT i.queue FROM {t} i WHERE i.state = '{state}' \
                   AND i.payload IS NOT NULL AND i.queue > {c}.queue \
                 ORDER BY i.queue LIMIT 1) n)"
        )
    };
    format!(
        "WITH RECURSIVE {}, {}, {}, {} \
         SELECT queue FROM r UNION SELECT queue FROM s \
         UNION SELECT queue FROM l UNION SELECT queue FROM d",
        walk("r", "ready"),
        walk("s", "scheduled"),
        walk("l", "leased"),
        walk("d", "dead"),
    )
}

/// One batch of a keyset walk (see [`Sql::reap`]) that moves rows of a
/// queue to Ready: up to $2 rows matching `filter`, in `(key, id)` order
/// after the key ($4 as text, $5) where the last batch stopped, locked
/// (`SKIP LOCKED`) and updated by id alone with `set`. $1 queue, $3 notify
/// channel (one notification when any moved). Returns the rows locked, the
/// rows moved, two zero counts (the walk sums three) and the key of the
/// last row locked.
pub(crate) fn to_ready_walk(t: &str, key: &str, filter: &str, set: &str) -> String {
    format!(
        "WITH c AS MATERIALIZED ( \
           SELECT id, {key} AS at FROM {t} \
           WHERE queue = $1 AND {filter} AND ({key}, id) > ($4::timestamptz, $5::bigint) \
           ORDER BY {key}, id LIMIT $2 FOR UPDATE SKIP LOCKED \
         ), r AS ( \
           UPDATE {t} i SET {set} \
           WHERE i.id = ANY(ARRAY(SELECT id FROM c)) RETURNING i.id \
         ), hint AS ( \
           SELECT count(pg_notify($3, $1)) AS n FROM (SELECT 1 FROM r LIMIT 1) x \
         ), last AS ( \
           SELECT at, id FROM c ORDER BY at DESC, id DESC LIMIT 1 \
         ) \
         SELECT (SELECT count(*) FROM c) AS locked, count(*) AS moved, 0::bigint, \
                0::bigint, (SELECT at::text FROM last), (SELECT id FROM last) \
         FROM r CROSS JOIN hint"
    )
}

/// The parts of an ack statement beside its `DELETE`.
struct AckParts<'a> {
    /// The unique-for hold, unless a cancel was requested.
    hold: &'a str,
    /// The kept record (see `record`).
    kept: &'a str,
    /// The completion counted (see `completions::counted`).
    counted: &'a str,
    /// The `events` CTE (see `crate::events::cte`).
    events: &'a str,
}

/// An ack of the lease `$1`-`$3`.
fn ack(t: &str, fence: &str, held_ms: &str, parts: &AckParts<'_>) -> String {
    let AckParts {
        hold,
        kept,
        counted,
        events,
    } = parts;
    format!(
        "WITH d AS ( \
           DELETE FROM {t} WHERE {fence} \
           RETURNING id, queue, dedup_key, {held_ms}, enqueued_at, attempts, payload, \
             last_error, cancel_requested \
         ), {hold}, {kept}, {counted}, {events} \
         SELECT count(*) FROM d CROSS JOIN done CROSS JOIN events"
    )
}

impl Sql {
    /// Renders every statement for `schema` (already validated).
    pub(crate) fn new(schema: &str) -> Self {
        let t = format!("\"{schema}\".leaseq_items");
        let r = format!("\"{schema}\".leaseq_requests");
        let seq = format!("'\"{schema}\".leaseq_item_id'");
        let h = format!("\"{schema}\".leaseq_held_keys");
        let k = format!("\"{schema}\".leaseq_takeovers");
        let f = finished_table(schema);
        let p = retention_table(schema);
        // The `events` CTE of a statement on the queue `$q` (see
        // `crate::events::cte`): `rows` yields the queue `q` and the event's
        // text `w` of each change; `$ch` the notify channel.
        let events =
            |ch: &str, q: &str, rows: &str| crate::events::cte(schema, ch, Gate::Queue(q), rows);
        // The ending of a row an ack deleted: Cancelled when a cancel was
        // requested.
        let ending_of_d = "CASE WHEN d.cancel_requested THEN 'cancelled' ELSE 'completed' END";
        // The CTEs an ack adds after its `d` (the rows it deleted: id,
        // queue, dedup_key, unique_for_ms): unique-for keys held from now,
        // and, when there are any, up to 16 holds of those queues that ran
        // out dropped.
        let hold = format!(
            "held AS ( \
               INSERT INTO {h} (queue, dedup_key, id, held_until) \
               SELECT queue, dedup_key, id, now() + unique_for_ms * interval '1 millisecond' \
               FROM d WHERE unique_for_ms IS NOT NULL AND dedup_key IS NOT NULL \
               ON CONFLICT (queue, dedup_key) DO UPDATE \
                 SET id = EXCLUDED.id, held_until = EXCLUDED.held_until \
             ), pruned AS ( \
               DELETE FROM {h} x USING ( \
                 SELECT queue, dedup_key FROM {h} \
                 WHERE queue IN (SELECT queue FROM d WHERE unique_for_ms IS NOT NULL) \
                   AND held_until <= now() \
                 ORDER BY queue, held_until LIMIT 16 FOR UPDATE SKIP LOCKED \
               ) o WHERE x.queue = o.queue AND x.dedup_key = o.dedup_key AND x.held_until <= now() \
             )"
        );
        // A held lease: the row, under the token, Leased. Leased is said as
        // `lease_expires_at IS NOT NULL` (with a token, that is Leased by
        // the `leaseq_items_lease_fields` check), not `state = 'leased'`:
        // that would let the planner serve the statement from the leased
        // index, which it takes when it thinks the index small (a table
        // never analyzed, or analyzed with few leases), and which then
        // walks every lease of the queue, and every entry ended leases
        // left in it, to find one row. Without it only the primary key
        // serves.
        let fence = "id = $1 AND queue = $2 AND token = $3 AND lease_expires_at IS NOT NULL";
        // The unique-for hold an ack's deleted row asks for: none for an
        // item with a cancel request (it ends Cancelled, not acked).
        let held_ms =
            "CASE WHEN cancel_requested THEN NULL ELSE unique_for_ms END AS unique_for_ms";
        // The head of a statement that ends a lease other than by an ack:
        // the held row, locked, with its cancel request as of its latest
        // version (a cancel that committed while this waited for the lock
        // is seen). `gone` deletes the row when a cancel was requested (the
        // item ends Cancelled); the statement's UPDATE moves it otherwise
        // (`FROM held WHERE ... AND NOT held.cancel`). Both find the row by
        // id and, should it have changed since the statement's snapshot,
        // re-check on its latest version with `held`'s answer.
        // What a kept ending records of a deleted row (see `record`).
        let ended_cols = "queue, enqueued_at, attempts, payload, last_error";
        let ending = format!(
            "held AS MATERIALIZED ( \
               SELECT id, cancel_requested AS cancel FROM {t} WHERE {fence} FOR UPDATE \
             ), gone AS ( \
               DELETE FROM {t} g USING held WHERE g.id = held.id AND held.cancel \
               RETURNING g.id, {ended_cols} \
             )"
        );
        // The record of the items `gone` ended Cancelled; `$n` the notify
        // channel.
        let cancelled = |n: &str| record(schema, "gone", "'cancelled'", "NULL::bytea", n);
        // What a lease's end clears besides the lease: its progress.
        let unleased =
            "token = NULL, lease_expires_at = NULL, progress = NULL, progress_token = NULL";
        // A release or a snooze: $4 delay (ms), $5 notify channel; `set`
        // says where the item goes. One row when the fence held: the state
        // the item went to, or 'cancelled'.
        // The events of a statement that ended a lease: `moved` (an
        // event's text of `r`'s row) for the rows it moved, Cancelled for
        // those `gone` deleted.
        let lease_end = |moved: &str| {
            format!(
                "SELECT $2::text AS q, {moved} AS w FROM r \
                 UNION ALL SELECT $2::text, {} FROM gone",
                wire::bare("cancelled", "id")
            )
        };
        let put_back = |set: &str| {
            format!(
                "WITH {ending}, {kept}, r AS ( \
                   UPDATE {t} i SET {set}, \
                     available_at = now() + $4 * interval '1 millisecond', {unleased} \
                   FROM held WHERE i.id = held.id AND NOT held.cancel RETURNING i.id, i.state \
                 ), hint AS ( \
                   SELECT count(pg_notify($5, $2)) AS n \
                   FROM (SELECT 1 FROM r WHERE state = 'ready' LIMIT 1) x \
                 ), {events} \
                 SELECT r.state FROM r CROSS JOIN hint CROSS JOIN events \
                 UNION ALL SELECT 'cancelled' FROM gone CROSS JOIN done CROSS JOIN events",
                kept = cancelled("$5"),
                events = events(
                    "$5",
                    "$2",
                    &lease_end(&format!(
                        "CASE WHEN state = 'dead' THEN {} ELSE {} END",
                        wire::reason("dead", "id", "'attempts exhausted'"),
                        wire::bare("released", "id")
                    ))
                ),
            )
        };
        // Completions counted by the acks' statements, from their `d`.
        let counted = crate::completions::counted(schema, "d");
        let info = info_columns();
        // A row whose attempts reached its maximum (at most
        // `ATTEMPTS_LIMIT`) is not leased: it is poison.
        let healthy = "payload IS NOT NULL AND attempts < max_attempts";
        // The predicate of the poison index, word for word, so the
        // planner matches it.
        let poison = format!(
            "(payload IS NULL OR attempts = {ATTEMPTS_LIMIT} \
              OR (exhausted AND state IN ('ready', 'scheduled')))"
        );
        // Every state, said so that each state's partial index serves.
        let any_state =
            "(state = 'ready' OR state = 'scheduled' OR state = 'leased' OR state = 'dead')";
        let peek_ready = format!(
            "SELECT {info} FROM {t} WHERE queue = $1 AND payload IS NOT NULL \
             AND (state = 'ready' OR (state = 'scheduled' AND available_at <= now())) \
             ORDER BY priority DESC, id LIMIT $2"
        );
        let peek_scheduled = format!(
            "SELECT {info} FROM {t} WHERE queue = $1 AND payload IS NOT NULL \
             AND state = 'scheduled' AND available_at > now() ORDER BY available_at, id LIMIT $2"
        );
        let peek_leased = format!(
            "SELECT {info} FROM {t} WHERE queue = $1 AND payload IS NOT NULL \
             AND state = 'leased' ORDER BY lease_expires_at, id LIMIT $2"
        );
        let peek_dead = format!(
            "SELECT {info} FROM {t} WHERE queue = $1 AND payload IS NOT NULL \
             AND state = 'dead' ORDER BY dead_at, id LIMIT $2"
        );
        // The leases acks deleted (`d`): Completed with `result`, or
        // Cancelled when a cancel was requested.
        let acked = |result: Option<&str>| {
            format!(
                "SELECT queue AS q, {} AS w FROM d",
                wire::acked("id", "cancel_requested", result)
            )
        };
        // The items an enqueue inserted (`ins`; not those it deduplicated).
        let enqueued = format!(
            "SELECT $1::text AS q, {} AS w FROM ins",
            wire::bare("enqueued", "id")
        );
        Sql {
            items_table: t.clone(),
            // $1 queue, $2 payloads, $3 priorities, $4 max attempts,
            // $5 dedup keys, $6 delays (ms), $7 notify channel, $8 unique-for
            // holds (ms, NULL: none). A key held after an ack
            // (`leaseq_held_keys`) counts as held like a live holder's.
            // Ids are drawn in batch order, so FIFO holds within a batch.
            // Rows go in by key (then batch order): the first item with a
            // key wins inside the batch, and concurrent batches meet their
            // keys in one global order, so they never deadlock.
            enqueue: format!(
                "WITH input AS MATERIALIZED ( \
                   SELECT nextval({seq}) AS id, t.* \
                   FROM unnest($2::bytea[], $3::int4[], $4::int4[], $5::text[], $6::int8[], $8::int8[]) \
                        WITH ORDINALITY AS t(payload, priority, max_attempts, dedup_key, delay_ms, unique_for_ms, ord) \
                 ), ins AS ( \
                   INSERT INTO {t} (id, queue, state, priority, payload, max_attempts, dedup_key, \
                                    enqueued_at, available_at, unique_for_ms) \
                   SELECT id, $1, CASE WHEN delay_ms > 0 THEN 'scheduled' ELSE 'ready' END, \
                          priority, payload, max_attempts, dedup_key, now(), \
                          now() + delay_ms * interval '1 millisecond', unique_for_ms \
                   FROM input \
                   WHERE NOT EXISTS (SELECT 1 FROM {h} k WHERE k.queue = $1 \
                                     AND k.dedup_key = input.dedup_key AND k.held_until > now()) \
                   ORDER BY dedup_key, ord \
                   ON CONFLICT (queue, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING \
                   RETURNING id, state \
                 ), hint AS ( \
                   SELECT count(pg_notify($7, $1)) AS n \
                   FROM (SELECT 1 FROM ins WHERE state = 'ready' LIMIT 1) x \
                 ), {events} \
                 SELECT input.id, ins.id IS NOT NULL AS inserted \
                 FROM input LEFT JOIN ins ON ins.id = input.id CROSS JOIN hint CROSS JOIN events \
                 ORDER BY input.ord",
                events = events("$7", "$1", &enqueued),
            ),
            // A batch without dedup keys: no arbitration, no join back.
            // $1 queue, $2 payloads, $3 priorities, $4 max attempts,
            // $5 delays (ms), $6 notify channel. The function scan yields
            // the rows in batch order and `nextval` runs once per row as
            // they pass, so ids rise with the batch order; the ids come
            // back sorted, in one array.
            enqueue_plain: format!(
                "WITH ins AS ( \
                   INSERT INTO {t} (id, queue, state, priority, payload, max_attempts, \
                                    enqueued_at, available_at) \
                   SELECT nextval({seq}), $1, \
                          CASE WHEN delay_ms > 0 THEN 'scheduled' ELSE 'ready' END, \
                          priority, payload, max_attempts, now(), \
                          now() + delay_ms * interval '1 millisecond' \
                   FROM unnest($2::bytea[], $3::int4[], $4::int4[], $5::int8[]) \
                        AS t(payload, priority, max_attempts, delay_ms) \
                   RETURNING id, state \
                 ), hint AS ( \
                   SELECT count(pg_notify($6, $1)) AS n \
                   FROM (SELECT 1 FROM ins WHERE state = 'ready' LIMIT 1) x \
                 ), {events} \
                 SELECT array_agg(ins.id ORDER BY ins.id) FROM ins CROSS JOIN hint CROSS JOIN events",
                events = events("$6", "$1", &enqueued),
            ),
            // Live holders come last, so they win over a hold.
            dedup_holders: format!(
                "SELECT dedup_key, id FROM {h} WHERE queue = $1 AND dedup_key = ANY($2::text[]) \
                   AND held_until > now() \
                 UNION ALL \
                 SELECT dedup_key, id FROM {t} WHERE queue = $1 AND dedup_key = ANY($2::text[])"
            ),
            // $1 queue, $2 max, $3 ttl (ms), $4 tokens (uuid[], one per
            // slot, in claim order). The Ready head and the due Scheduled
            // head are each locked through their own index, merged in one
            // claim order, and the first $2 leased; `slot` numbers them in
            // claim order, so the n-th lease gets the n-th token. Both heads
            // pass over rows the claim cannot lease (poison: no payload, or
            // an attempt counter at its limit), so those never take a slot
            // nor stall the queue. In the same statement, up to `MAX_CLAIM`
            // poison rows of the queue's Ready and as many of its due
            // Scheduled rows, found through the poison index by `(queue,
            // state)` (so the poison already in Dead is never walked), are
            // moved aside: a row without a payload (an entry whose item is
            // missing) is deleted, a row whose counter cannot be
            // incremented goes to Dead with a reason. Both come back as
            // repairs (`repair_state` the state they were in).
            //
            // Queue limits (src/limits.rs): $5 says whether the caller
            // holds the queue's limits row. When it does not and the queue
            // has limits, the statement leases nothing (the heads lock no
            // row) and returns one row of kind 'limited': the caller claims
            // again under the lock.
            //
            // A pause (`Control::pause`) is stored on the same row, read by
            // the same probe of its primary key: on a paused queue the
            // heads lock no row and the statement returns one row of kind
            // 'paused'. A paused queue is never 'limited'.
            //
            // A lease under a token a reap took from an earlier lease of the
            // same item (a claim sent again after a lost reply reuses its
            // tokens) drops that takeover trace (`untraced`), which would
            // otherwise speak of this lease to `lease_fate`.
            //
            // $6 is the notify channel, for the Started events (`events`).
            //
            // Leases are stamped with the clock read by the statement itself
            // (`clock`, evaluated after its snapshot), not `now()` (the
            // transaction's start) nor the time the limits were judged by: an
            // enqueue can commit between either and the snapshot, and a lease
            // stamped before it would predate an item the claim sees.
            claim: format!(
                "WITH gate AS MATERIALIZED ( \
                   SELECT coalesce(bool_or(paused), false) AS paused, \
                          coalesce(bool_or(NOT $5::bool AND NOT paused \
                                           AND (concurrency IS NOT NULL OR rate IS NOT NULL)), \
                                   false) AS limited \
                   FROM {lim} WHERE queue = $1 \
                 ), clock AS MATERIALIZED ( \
                   SELECT clock_timestamp() AS at \
                 ), ready AS MATERIALIZED ( \
                   SELECT id, priority FROM {t} \
                   WHERE queue = $1 AND state = 'ready' AND {healthy} \
                     AND NOT (SELECT limited OR paused FROM gate) \
                   ORDER BY priority DESC, id LIMIT $2 FOR UPDATE SKIP LOCKED \
                 ), due AS MATERIALIZED ( \
                   SELECT id, priority FROM {t} \
                   WHERE queue = $1 AND state = 'scheduled' AND available_at <= now() AND {healthy} \
                     AND NOT (SELECT limited OR paused FROM gate) \
                   ORDER BY priority DESC, id LIMIT $2 FOR UPDATE SKIP LOCKED \
                 ), pick AS MATERIALIZED ( \
                   SELECT id, (row_number() OVER (ORDER BY priority DESC, id))::int AS slot \
                   FROM (SELECT * FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) c \
                         ORDER BY priority DESC, id LIMIT $2) h \
                 ), bad_ready AS MATERIALIZED ( \
                   SELECT id, state, payload IS NULL AS missing FROM {t} \
                   WHERE queue = $1 AND state = 'ready' AND {poison} \
                   LIMIT {poison_batch} FOR UPDATE SKIP LOCKED \
                 ), bad_due AS MATERIALIZED ( \
                   SELECT id, state, payload IS NULL AS missing FROM {t} \
                   WHERE queue = $1 AND state = 'scheduled' AND available_at <= now() \
                     AND {poison} \
                   LIMIT {poison_batch} FOR UPDATE SKIP LOCKED \
                 ), bad AS MATERIALIZED ( \
                   SELECT * FROM bad_ready UNION ALL SELECT * FROM bad_due \
                 ), removed AS ( \
                   DELETE FROM {t} g USING bad \
                   WHERE g.id = bad.id AND bad.missing AND g.payload IS NULL \
                   RETURNING g.id, g.state \
                 ), quarantined AS ( \
                   UPDATE {t} q SET state = 'dead', dead_at = now(), \
                          last_error = CASE WHEN q.attempts = {ATTEMPTS_LIMIT} \
                                            THEN '{QUARANTINED}' ELSE 'attempts exhausted' END, \
                          token = NULL, lease_expires_at = NULL \
                   FROM bad \
                   WHERE q.id = bad.id AND NOT bad.missing AND q.payload IS NOT NULL \
                     AND q.attempts >= q.max_attempts AND q.state IN ('ready', 'scheduled') \
                   RETURNING q.id, bad.state, q.attempts, q.max_attempts \
                 ), leased AS ( \
                   UPDATE {t} i SET state = 'leased', token = ($4::uuid[])[pick.slot], \
                          attempts = i.attempts + 1, \
                          lease_expires_at = (SELECT at FROM clock) \
                                             + $3 * interval '1 millisecond' \
                   FROM pick \
                   WHERE i.id = pick.id AND i.payload IS NOT NULL \
                     AND i.attempts < i.max_attempts AND i.state IN ('ready', 'scheduled') \
                   RETURNING i.id, i.token, i.payload, i.attempts, i.max_attempts, i.priority, \
                             {exp} AS expires_ms, {enq} AS enqueued_ms \
                 ), untraced AS ( \
                   DELETE FROM {k} x USING leased l WHERE x.id = l.id AND x.token = l.token \
                 ), {events} \
                 SELECT id, token, payload, attempts, max_attempts, priority, expires_ms, \
                        NULL::text AS repair_state, NULL::text AS repair, enqueued_ms \
                 FROM leased CROSS JOIN events \
                 UNION ALL \
                 SELECT id, NULL, NULL, 0, 0, 0, 0, state, 'missing', 0 FROM removed \
                 UNION ALL \
                 SELECT id, NULL, NULL, attempts, max_attempts, 0, 0, state, 'quarantined', 0 \
                 FROM quarantined \
                 UNION ALL \
                 SELECT 0, NULL, NULL, 0, 0, 0, 0, NULL, 'limited', 0 FROM gate WHERE limited \
                 UNION ALL \
                 SELECT 0, NULL, NULL, 0, 0, 0, 0, NULL, 'paused', 0 FROM gate WHERE paused",
                exp = ms("i.lease_expires_at"),
                enq = ms("i.enqueued_at"),
                lim = crate::limits::table(schema),
                poison_batch = leaseq_core::limits::MAX_CLAIM,
                events = events(
                    "$6",
                    "$1",
                    &format!(
                        "SELECT $1::text AS q, {} AS w FROM leased",
                        wire::started("id", "attempts")
                    ),
                ),
            ),
            // $1 queue, $2 and $3 the first and last token of the claim's
            // family, $4 the claim's ttl (ms). Uuids compare as big-endian
            // bytes, i.e. as the u128 the token is, so the family is one
            // range and token order is slot (claim) order. The family's
            // expired leases that no reap took are renewed in the same
            // statement (the UPDATE re-checks token and expiry on the row's
            // latest version, so a reap that took one first wins); the live
            // ones come from the snapshot as they are. It walks the queue's
            // leases through the leased index: its cost grows with them,
            // which is fine for a call made only after a lost reply.
            recover_claim: format!(
                "WITH renewed AS ( \
                   UPDATE {t} SET lease_expires_at = now() + $4 * interval '1 millisecond' \
                   WHERE queue = $1 AND state = 'leased' AND lease_expires_at <= now() \
                     AND token BETWEEN $2 AND $3 AND payload IS NOT NULL \
                   RETURNING id, token, payload, attempts, max_attempts, priority, \
                     {exp} AS expires_ms, {enq} AS enqueued_ms \
                 ) \
                 SELECT id, token, payload, attempts, max_attempts, priority, expires_ms, \
                        NULL::text, NULL::text, enqueued_ms \
                 FROM ( \
                   SELECT id, token, payload, attempts, max_attempts, priority, \
                          {exp} AS expires_ms, {enq} AS enqueued_ms \
                   FROM {t} \
                   WHERE queue = $1 AND state = 'leased' AND lease_expires_at > now() \
                     AND token BETWEEN $2 AND $3 AND payload IS NOT NULL \
                   UNION ALL SELECT * FROM renewed \
                 ) l ORDER BY token",
                exp = ms("lease_expires_at"),
                enq = ms("enqueued_at"),
            ),
            // $1 id, $2 queue, $3 token, $4 held until (epoch ms), $5 the
            // traces' memory (ms). One row always: the fate, and the item's
            // (effective) state or NULL. Past `held_until` a takeover trace
            // says a reap took the lease (a claim that leases an item under
            // a token drops the trace an earlier lease under that token
            // left: a claim sent again reuses its tokens); none, within the
            // memory, says its own call ended it (a trace older than the
            // memory is still true, so it is not filtered by age).
            lease_fate: format!(
                "SELECT CASE WHEN i.state = 'leased' AND i.token = $3 THEN 'held' \
                             WHEN {now} < $4 THEN 'finished' \
                             WHEN EXISTS (SELECT 1 FROM {k} WHERE id = $1 AND token = $3) THEN 'lost' \
                             WHEN {now} - $5 < $4 THEN 'finished' ELSE 'lost' END AS fate, \
                        CASE WHEN i.state = 'scheduled' AND i.available_at <= now() \
                             THEN 'ready' ELSE i.state END AS state \
                 FROM (VALUES (1)) AS one(x) \
                 LEFT JOIN {t} i ON i.id = $1 AND i.queue = $2 AND i.payload IS NOT NULL",
                now = ms("now()"),
            ),
            // $1 queue, $2 request, $3 memory (ms). Inserts the request's
            // row, or locks the existing one (waiting for a concurrent first
            // call to finish). A row whose memory ran out starts afresh.
            // Returns the stored results: NULL for a new request.
            request_begin: format!(
                "INSERT INTO {r} AS r (queue, request, expires_at) \
                 VALUES ($1, $2, now() + $3 * interval '1 millisecond') \
                 ON CONFLICT (queue, request) DO UPDATE SET \
                   ids = CASE WHEN r.expires_at > now() THEN r.ids END, \
                   deduplicated = CASE WHEN r.expires_at > now() THEN r.deduplicated END, \
                   expires_at = CASE WHEN r.expires_at > now() THEN r.expires_at \
                                     ELSE EXCLUDED.expires_at END \
                 RETURNING ids, deduplicated"
            ),
            // $1 queue, $2 request, $3 ids, $4 deduplicated flags.
            request_done: format!(
                "UPDATE {r} SET ids = $3::bigint[], deduplicated = $4::boolean[] \
                 WHERE queue = $1 AND request = $2"
            ),
            // $1 queue, $2 batch, $3 the expiry the last batch stopped at.
            // Through the expiry index from there on, in index order: the
            // cost follows the expired rows, and no batch walks again over
            // the entries of rows earlier batches deleted (dead until a
            // vacuum). Rows of that very expiry are seen again; those the
            // last batch deleted are no longer visible, so each batch
            // deletes new rows or is the last.
            reap_requests: format!(
                "WITH c AS MATERIALIZED ( \
                   SELECT request, expires_at AS at FROM {r} \
                   WHERE queue = $1 AND expires_at <= now() AND expires_at >= $3::timestamptz \
                   ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED \
                 ), d AS ( \
                   DELETE FROM {r} d USING c \
                   WHERE d.queue = $1 AND d.request = c.request AND d.expires_at <= now() \
                   RETURNING 1 \
                 ) \
                 SELECT (SELECT count(*) FROM c) AS locked, (SELECT count(*) FROM d), \
                        (SELECT max(at)::text FROM c)"
            ),
            // $1 id, $2 queue, $3 token, $4 notify channel. One row when
            // the fence held; the item recorded when its queue keeps it
            // (`record`: Cancelled when a cancel was requested). A
            // unique-for key is held from now on (`{hold}`), unless a cancel
            // was requested: the item ends Cancelled, its key free at once.
            // RETURNING reads the version deleted, so a cancel that
            // committed while the ack waited for the row is seen.
            ack: ack(
                &t,
                fence,
                held_ms,
                &AckParts {
                    hold: &hold,
                    kept: &record(schema, "d", ending_of_d, "NULL::bytea", "$4"),
                    counted: &counted,
                    events: &events("$4", "$2", &acked(None)),
                },
            ),
            // ... $4 notify channel, $5 the result.
            complete: ack(
                &t,
                fence,
                held_ms,
                &AckParts {
                    hold: &hold,
                    kept: &record(schema, "d", ending_of_d, "$5::bytea", "$4"),
                    counted: &counted,
                    events: &events("$4", "$2", &acked(Some("$5::bytea"))),
                },
            ),
            // $1 ids, $2 queues, $3 tokens (parallel arrays), $4 notify
            // channel: one statement, each row fenced on its own; the rows
            // deleted come back, those the policy keeps recorded.
            ack_many: format!(
                "WITH d AS ( \
                   DELETE FROM {t} i USING unnest($1::bigint[], $2::text[], $3::uuid[]) \
                     AS l(id, queue, token) \
                   WHERE i.id = l.id AND i.queue = l.queue AND i.token = l.token \
                     AND i.lease_expires_at IS NOT NULL \
                   RETURNING i.id, i.queue, i.token, i.dedup_key, {held_ms}, \
                     i.enqueued_at, i.attempts, i.payload, i.last_error, i.cancel_requested \
                 ), {hold}, {kept}, {counted}, {events} \
                 SELECT id, queue, token FROM d CROSS JOIN done CROSS JOIN events",
                kept = record(schema, "d", ending_of_d, "NULL::bytea", "$4"),
                events = crate::events::cte(schema, "$4", Gate::PerRow, &acked(None)),
            ),
            // ... $4 ttl (ms). Also whether a cancel was requested.
            extend: format!(
                "UPDATE {t} SET lease_expires_at = now() + $4 * interval '1 millisecond' \
                 WHERE {fence} RETURNING {exp}, cancel_requested",
                exp = ms("lease_expires_at"),
            ),
            // ... $4 delay (ms), $5 notify channel. One row when the fence
            // held: the state the item went to, or 'cancelled'.
            release: put_back(
                "state = CASE WHEN i.attempts >= i.max_attempts THEN 'dead' \
                              WHEN $4 > 0 THEN 'scheduled' ELSE 'ready' END, \
                 dead_at = CASE WHEN i.attempts >= i.max_attempts THEN now() END, \
                 last_error = CASE WHEN i.attempts >= i.max_attempts \
                                   THEN 'attempts exhausted' ELSE i.last_error END",
            ),
            // ... $4 notify channel. Back to Ready (at its place: the Ready
            // index orders by priority and id) with the claim's attempt
            // taken back; one row when the fence held.
            // `events` is read in the select list: the one row comes also
            // when `r` is empty.
            give_back: format!(
                "WITH {ending}, {kept}, r AS ( \
                   UPDATE {t} i SET state = 'ready', attempts = greatest(i.attempts - 1, 0), \
                     available_at = now(), {unleased} \
                   FROM held WHERE i.id = held.id AND NOT held.cancel RETURNING i.id \
                 ), hint AS ( \
                   SELECT count(pg_notify($4, $2)) AS n FROM r \
                 ), {events} \
                 SELECT count(*) + (SELECT count(*) FROM gone), (SELECT n FROM events) \
                 FROM r CROSS JOIN hint CROSS JOIN done",
                kept = cancelled("$4"),
                events = events("$4", "$2", &lease_end(&wire::bare("released", "id"))),
            ),
            // ... $4 reason, $5 notify channel. One row: 1 when the fence
            // held.
            fail: format!(
                "WITH {ending}, {kept}, r AS ( \
                   UPDATE {t} i SET state = 'dead', dead_at = now(), last_error = $4, {unleased} \
                   FROM held WHERE i.id = held.id AND NOT held.cancel RETURNING i.id \
                 ), {events} \
                 SELECT (SELECT count(*) FROM r) + (SELECT count(*) FROM gone) \
                 FROM done CROSS JOIN events",
                kept = cancelled("$5"),
                events = events("$5", "$2", &lease_end(&wire::reason("dead", "id", "$4::text"))),
            ),
            // ... $4 delay (ms), $5 notify channel. As `release`, but the
            // claim's attempt is taken back and the item never goes Dead.
            snooze: put_back(
                "state = CASE WHEN $4 > 0 THEN 'scheduled' ELSE 'ready' END, \
                 attempts = greatest(i.attempts - 1, 0)",
            ),
            // ... $4 value, $5 notify channel. One row: 1 when the fence
            // held.
            progress: format!(
                "WITH u AS ( \
                   UPDATE {t} SET progress = $4, progress_token = token WHERE {fence} \
                   RETURNING id \
                 ), {events} \
                 SELECT count(*) FROM u CROSS JOIN events",
                events = crate::events::cte_in_pieces(
                    schema,
                    "$5",
                    Gate::Queue("$2"),
                    &format!(
                        "SELECT $2::text AS q, {} AS w FROM u",
                        wire::progress("id", "$4::bytea")
                    )
                ),
            ),
            // $1 queue, $2 batch, $3 notify channel, $4 and $5 the key
            // (lease_expires_at as text, id) after which this batch starts
            // ([`WALK_START`] for the first). The batches of one reap walk
            // the leased index once, each from where the last one stopped:
            // the index entries of leases that ended earlier (acked, released,
            // reaped by the batch before) stay in the index until vacuum
            // removes them, and a batch that started from the front would
            // step over all of them again (and visit each one's row while an
            // old snapshot keeps them from being marked dead). The rows are
            // locked in `c` (which re-checks its conditions on the row's
            // latest version), so nobody changes them before the UPDATE;
            // the UPDATE finds them by id alone and re-checks the expiry (a
            // non-NULL expiry means Leased, by `leaseq_items_lease_fields`).
            // It names no state on purpose: with `state = 'leased'` the
            // leased index would serve the UPDATE too, and a planner that
            // underestimates it (a table never analyzed) walks that whole
            // index, every queue's expired leases and leftovers, for 500
            // rows. A lease whose item has a cancel request is deleted
            // instead (`gone`: the item ends Cancelled), found and
            // re-checked the same way. Each lease taken leaves its takeover
            // trace (`taken`) in the same statement, for `lease_fate`.
            // Returns the rows locked, the counts (requeued, dead,
            // cancelled), and the key of the last row locked (the next
            // batch's start).
            reap: format!(
                "WITH c AS MATERIALIZED ( \
                   SELECT id, token, lease_expires_at AS at, cancel_requested AS cancel FROM {t} \
                   WHERE queue = $1 AND state = 'leased' AND lease_expires_at <= now() \
                     AND (lease_expires_at, id) > ($4::timestamptz, $5::bigint) \
                   ORDER BY lease_expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED \
                 ), r AS ( \
                   UPDATE {t} i SET \
                     state = CASE WHEN i.attempts >= i.max_attempts THEN 'dead' ELSE 'ready' END, \
                     dead_at = CASE WHEN i.attempts >= i.max_attempts THEN now() END, \
                     last_error = CASE WHEN i.attempts >= i.max_attempts \
                                       THEN 'lease expired on final attempt' ELSE i.last_error END, \
                     available_at = now(), {unleased} \
                   WHERE i.id = ANY(ARRAY(SELECT id FROM c WHERE NOT cancel)) \
                     AND i.lease_expires_at <= now() \
                   RETURNING i.id, i.state \
                 ), gone AS ( \
                   DELETE FROM {t} i \
                   WHERE i.id = ANY(ARRAY(SELECT id FROM c WHERE cancel)) \
                     AND i.lease_expires_at <= now() \
                   RETURNING i.id, 'cancelled'::text AS state, {ended_cols} \
                 ), {kept}, ended AS ( \
                   SELECT id, state FROM r UNION ALL SELECT id, state FROM gone \
                 ), {events}, taken AS ( \
                   INSERT INTO {k} (id, token, queue, taken_at) \
                   SELECT c.id, c.token, $1, now() FROM c JOIN ended e ON e.id = c.id \
                   ON CONFLICT (id, token) DO UPDATE SET taken_at = EXCLUDED.taken_at \
                 ), hint AS ( \
                   SELECT count(pg_notify($3, $1)) AS n \
                   FROM (SELECT 1 FROM r WHERE state = 'ready' LIMIT 1) x \
                 ), last AS ( \
                   SELECT at, id FROM c ORDER BY at DESC, id DESC LIMIT 1 \
                 ) \
                 SELECT (SELECT count(*) FROM c) AS locked, \
                        count(*) FILTER (WHERE e.state = 'ready') AS requeued, \
                        count(*) FILTER (WHERE e.state = 'dead') AS dead, \
                        count(*) FILTER (WHERE e.state = 'cancelled') AS cancelled, \
                        (SELECT at::text FROM last), (SELECT id FROM last) \
                 FROM ended e CROSS JOIN hint CROSS JOIN done CROSS JOIN events",
                kept = cancelled("$3"),
                events = events(
                    "$3",
                    "$1",
                    &format!(
                        "SELECT $1::text AS q, CASE state WHEN 'ready' THEN {} \
                           WHEN 'dead' THEN {} ELSE {} END AS w FROM ended",
                        wire::reason("failed", "id", "'lease expired'"),
                        wire::reason("dead", "id", "'lease expired on final attempt'"),
                        wire::bare("cancelled", "id"),
                    )
                ),
            ),
            // $1 queue, $2 the traces' memory (ms). Through the age index:
            // the cost follows the traces that ran out.
            forget_takeovers: format!(
                "DELETE FROM {k} WHERE queue = $1 \
                   AND taken_at <= now() - $2 * interval '1 millisecond'"
            ),
            // $1 queue, $2 batch, $3 the lease horizon in ms. Leases expiring
            // past the horizon (no claim or extend sets one; a clock that ran
            // ahead did, or a planted value such as 'infinity') expire now,
            // for the reap's walk to recover; the expiry is re-checked on the
            // row's latest version, so of two reapers one moves each.
            lease_horizon: format!(
                "WITH c AS MATERIALIZED ( \
                   SELECT id FROM {t} \
                   WHERE queue = $1 AND state = 'leased' \
                     AND lease_expires_at > now() + $3 * interval '1 millisecond' \
                   ORDER BY lease_expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED \
                 ) \
                 UPDATE {t} i SET lease_expires_at = now() \
                 WHERE i.id = ANY(ARRAY(SELECT id FROM c)) \
                   AND i.lease_expires_at > now() + $3 * interval '1 millisecond' \
                 RETURNING i.id"
            ),
            // $1 queue, $2 batch, $3 notify channel, $4 and $5 the key
            // (available_at as text, id) to start after, as for reap; the
            // rows locked in `c` are updated by id alone, as for reap.
            promote: to_ready_walk(
                &t,
                "available_at",
                "state = 'scheduled' AND available_at <= now()",
                "state = 'ready'",
            ),
            // $1 queue, $2 the cap (one more than the exact limit). Each
            // bucket counted through its own state index, up to the cap: the
            // cost follows the cap, not the queue (a count of 1,000,000 rows
            // reads them all, 0.5-1.2 s). A bucket at the cap is estimated by
            // `stats_sample`. Also the table's size in pages, for the
            // sample's rate. The buckets: Ready, due Scheduled (counted as
            // Ready), Scheduled not due, Leased, Dead. Each is ordered as its
            // index, so the planner walks the index: without it, on a queue
            // that is most of the table, it took a scan of the table for a
            // bucket it thought would fill its limit early (the due
            // Scheduled items, when most rows' due time has passed but no
            // Scheduled one's has), and read all of it (0.1-0.2 s at
            // 1,000,000 items). Then the pause, and the completion count
            // (the sum of the queue's stripes).
            stats: format!(
                "SELECT \
                   (SELECT count(*) FROM (SELECT 1 FROM {t} WHERE queue = $1 AND state = 'ready' \
                      AND payload IS NOT NULL ORDER BY priority DESC, id LIMIT $2) x), \
                   (SELECT count(*) FROM (SELECT 1 FROM {t} WHERE queue = $1 AND state = 'scheduled' \
                      AND available_at <= now() AND payload IS NOT NULL \
                      ORDER BY available_at, id LIMIT $2) x), \
                   (SELECT count(*) FROM (SELECT 1 FROM {t} WHERE queue = $1 AND state = 'scheduled' \
                      AND available_at > now() AND payload IS NOT NULL \
                      ORDER BY available_at, id LIMIT $2) x), \
                   (SELECT count(*) FROM (SELECT 1 FROM {t} WHERE queue = $1 AND state = 'leased' \
                      AND payload IS NOT NULL ORDER BY lease_expires_at, id LIMIT $2) x), \
                   (SELECT count(*) FROM (SELECT 1 FROM {t} WHERE queue = $1 AND state = 'dead' \
                      AND payload IS NOT NULL ORDER BY dead_at, id LIMIT $2) x), \
                   pg_relation_size('{t}') / current_setting('block_size')::bigint, \
                   (SELECT coalesce(bool_or(paused), false) FROM {lim} WHERE queue = $1), \
                   {completed}",
                lim = crate::limits::table(schema),
                completed = crate::completions::total(schema),
            ),
            // $1 queue, $2 the percentage of the table's pages to read
            // (`TABLESAMPLE SYSTEM`: whole pages, each taken with that
            // chance; 100 reads every page, and the counts are exact). The
            // same buckets as `stats`, counted in the sample. `REPEATABLE`:
            // the same pages while the table keeps its size, so repeated
            // calls on an unchanged queue agree (and find the pages cached).
            stats_sample: format!(
                "SELECT \
                   count(*) FILTER (WHERE state = 'ready'), \
                   count(*) FILTER (WHERE state = 'scheduled' AND available_at <= now()), \
                   count(*) FILTER (WHERE state = 'scheduled' AND available_at > now()), \
                   count(*) FILTER (WHERE state = 'leased'), \
                   count(*) FILTER (WHERE state = 'dead') \
                 FROM {t} TABLESAMPLE SYSTEM ($2::float8) REPEATABLE (42) \
                 WHERE queue = $1 AND payload IS NOT NULL"
            ),
            queues: queues(&t),
            peek: [peek_ready, peek_scheduled, peek_leased, peek_dead],
            item: format!(
                "SELECT {info} FROM {t} WHERE queue = $1 AND id = $2 AND payload IS NOT NULL"
            ),
            // $1 queue, $2 limit, $3 notify channel, $4 and $5 the key
            // (dead_at as text, id) to start after, as for reap; the rows
            // locked in `c` are updated by id alone, as for reap.
            redrive: to_ready_walk(
                &t,
                "dead_at",
                "state = 'dead'",
                "state = 'ready', attempts = 0, dead_at = NULL, available_at = now()",
            ),
            // $1 queue, $2 id, $3 notify channel. One row always: how many
            // rows moved (0 or 1), and the row's state as the statement
            // found it (NULL: no such item). `c` finds the row by the
            // primary key alone and locks it, reading its latest version:
            // of concurrent calls (and redrives) the first moves it and the
            // others, waiting on the lock, read it Ready. The update is the
            // redrive's for that one row. No clause names the state of the
            // row the update scans: `state = 'dead'` next to `queue = $1`
            // lets the planner walk the queue's whole dead index to find
            // one id (it does on a table never analyzed). The update clears
            // the lease fields, which a Dead row has clear already: when the
            // row went Dead after the statement's snapshot (a fail, a reap
            // on the final attempt), the update builds its row from the
            // Leased version first, and PostgreSQL checks
            // `leaseq_items_lease_fields` on that row before it redoes the
            // update on the Dead one (the suite's
            // `redrive_item_races_the_death`).
            redrive_item: format!(
                "WITH c AS MATERIALIZED ( \
                   SELECT id, state FROM {t} WHERE id = $2 AND queue = $1 AND payload IS NOT NULL \
                   FOR NO KEY UPDATE \
                 ), r AS ( \
                   UPDATE {t} i SET state = 'ready', attempts = 0, dead_at = NULL, \
                          available_at = now(), token = NULL, lease_expires_at = NULL \
                   FROM c WHERE i.id = c.id AND c.state = 'dead' \
                   RETURNING i.id \
                 ), hint AS ( \
                   SELECT count(pg_notify($3, $1)) AS n FROM (SELECT 1 FROM r LIMIT 1) x \
                 ) \
                 SELECT (SELECT count(*) FROM r) AS moved, (SELECT state FROM c) AS was \
                 FROM hint"
            ),
            // $1 queue, $2 id. The row, found by the primary key alone (no
            // state named, as for `redrive_item`), deleted in any state; its
            // effective state comes back, as `item` shows it (no row: no
            // such item). Unlike an ack it holds no key: a removed item was
            // not acked, so its dedup key is free at once. A claim or ack
            // holding the row's lock finishes first; the delete then reads
            // its latest version (a concurrent ack leaves nothing to delete).
            remove_item: format!(
                "DELETE FROM {t} WHERE id = $2 AND queue = $1 AND payload IS NOT NULL \
                 RETURNING CASE WHEN state = 'scheduled' AND available_at <= now() \
                   THEN 'ready' ELSE state END"
            ),
            // The queue's rows are found through the four state indexes
            // (every row is in one state, by the table's check; the OR lets
            // the planner take a BitmapOr of the partial indexes): with
            // `queue = $1` alone no index serves, and the delete reads the
            // whole table, every queue's rows (20-30 ms for a 10-item queue
            // among 10,000, where this takes 0.3 ms).
            purge: format!(
                "WITH f AS (DELETE FROM {f} WHERE queue = $1), \
                      fc AS (DELETE FROM {fc} WHERE queue = $1), \
                      k AS (DELETE FROM {h} WHERE queue = $1) \
                 DELETE FROM {t} WHERE queue = $1 AND {any_state}",
                fc = crate::history::kept_counts_table(schema),
            ),
            // One statement, so one snapshot: the items, their held keys,
            // the request records, the takeover traces, the limits row,
            // the kept items, the policy and the completion count go
            // together. Ids come from one sequence, so none is reused
            // afterwards.
            delete_queue: format!(
                "WITH k AS (DELETE FROM {h} WHERE queue = $1), \
                      q AS (DELETE FROM {r} WHERE queue = $1), \
                      l AS (DELETE FROM \"{schema}\".leaseq_queue_limits WHERE queue = $1), \
                      tk AS (DELETE FROM {k} WHERE queue = $1), \
                      f AS (DELETE FROM {f} WHERE queue = $1), \
                      fc AS (DELETE FROM {fc} WHERE queue = $1), \
                      p AS (DELETE FROM {p} WHERE queue = $1), \
                      cc AS (DELETE FROM {cc} WHERE queue = $1) \
                 DELETE FROM {t} WHERE queue = $1 AND {any_state}",
                cc = crate::completions::table(schema),
                fc = crate::history::kept_counts_table(schema),
            ),
        }
    }
}
