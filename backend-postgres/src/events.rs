//! [`Events`] on PostgreSQL: how events travel and what may lose them is
//! in the crate docs, [Job events](crate#job-events).
//!
//! Two halves. The SQL fragments here, which the statements that change
//! jobs ([`crate::sql`], [`crate::control`]) embed: an `events` CTE that
//! sends each event's [`JobEvent::to_wire`](leaseq_core::events::JobEvent::to_wire)
//! text with `pg_notify` while the queue's gate row is live. And a backend
//! handle's side: per followed queue, a task that renews the gate every
//! [`GATE_REFRESH`]; the handle's listener (`crate::notify`) reads the
//! notifications into its [`EventHub`](leaseq_core::events::EventHub).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use async_trait::async_trait;
use leaseq_core::events::{
    EventHub, EventStream, GATE_REFRESH, GATE_TTL, MAX_EVENT_RESULT, MAX_EVENT_TEXT,
};
use leaseq_core::{Events, QueueName, Result};
use sqlx::PgPool;

use crate::rows::db;
use crate::PgBackend;

/// The longest piece of an event's text one notification carries. A
/// `NOTIFY` payload holds under 8,000 bytes; a piece goes out as
/// `eventpart <queue> <piece>` (or `event ...` for the last), and a queue
/// name is at most 128 bytes. Only a progress value of more than about
/// 3,800 bytes takes two pieces (its hex is twice as long); every other
/// event fits in one, results and texts being capped.
pub(crate) const PIECE: usize = 7_680;

const _: () = assert!(PIECE + "eventpart ".len() + QueueName::MAX_LEN + 1 < 8_000);
const _: () = assert!(2 * MAX_EVENT_RESULT + 64 < PIECE && 2 * MAX_EVENT_TEXT + 64 < PIECE);

/// The gate table of `schema` (migration 0019).
pub(crate) fn table(schema: &str) -> String {
    format!("\"{schema}\".leaseq_event_listeners")
}

/// The SQL fragments that build events' wire texts, matching
/// [`JobEvent::to_wire`](leaseq_core::events::JobEvent::to_wire): the
/// kind's name, the id in decimal, then the kind's data, bytes as
/// lowercase hex (`-` for none).
pub(crate) mod wire {
    use super::{MAX_EVENT_RESULT, MAX_EVENT_TEXT};

    /// `bytes` (a `bytea` expression) as `to_wire` writes bytes.
    fn hexed(bytes: &str) -> String {
        format!("CASE WHEN octet_length({bytes}) = 0 THEN '-' ELSE encode({bytes}, 'hex') END")
    }

    /// `text` (a `text` expression) cut to [`MAX_EVENT_TEXT`] bytes at a
    /// character boundary, as core's `EventKind::failed` cuts it, in hex.
    /// The boundary: the byte after the cut is not a continuation byte
    /// (`10xxxxxx`); at most three steps back in valid UTF-8.
    fn cut_text(text: &str) -> String {
        let n = MAX_EVENT_TEXT;
        let boundary = |at: usize| format!("get_byte(b, {at}) & 192 <> 128");
        format!(
            "(SELECT CASE WHEN octet_length(b) = 0 THEN '-' ELSE encode(substring(b FROM 1 FOR \
               CASE WHEN octet_length(b) <= {n} THEN octet_length(b) \
                    WHEN {b0} THEN {n} WHEN {b1} THEN {n1} WHEN {b2} THEN {n2} ELSE {n3} END), \
               'hex') END \
             FROM (SELECT convert_to({text}, 'UTF8') AS b) x)",
            b0 = boundary(n),
            b1 = boundary(n - 1),
            b2 = boundary(n - 2),
            n1 = n - 1,
            n2 = n - 2,
            n3 = n - 3,
        )
    }

    /// A kind without data (`enqueued`, `released`, `cancelled`) of item
    /// `id`.
    pub(crate) fn bare(kind: &str, id: &str) -> String {
        format!("'{kind} ' || {id}")
    }

    /// `started`: attempt `attempt` of item `id`.
    pub(crate) fn started(id: &str, attempt: &str) -> String {
        format!("'started ' || {id} || ' ' || {attempt}")
    }

    /// `progress`: `value` (bytea).
    pub(crate) fn progress(id: &str, value: &str) -> String {
        format!("'progress ' || {id} || ' ' || {}", hexed(value))
    }

    /// `completed` with `result` (bytea; `None`: no result), left out
    /// past [`MAX_EVENT_RESULT`] as `EventKind::completed` does.
    pub(crate) fn completed(id: &str, result: Option<&str>) -> String {
        match result {
            None => format!("'completed ' || {id} || ' none'"),
            Some(r) => format!(
                "'completed ' || {id} || CASE WHEN {r} IS NULL THEN ' none' \
                   WHEN octet_length({r}) <= {MAX_EVENT_RESULT} THEN ' r ' || {} \
                   ELSE ' elided' END",
                hexed(r)
            ),
        }
    }

    /// The end of an acked lease: `cancelled` when `cancel` (a cancel was
    /// requested), else [`completed`].
    pub(crate) fn acked(id: &str, cancel: &str, result: Option<&str>) -> String {
        format!(
            "CASE WHEN {cancel} THEN {} ELSE {} END",
            bare("cancelled", id),
            completed(id, result)
        )
    }

    /// `failed` or `dead` (`kind`) with the reason `text` (a `text`
    /// expression).
    pub(crate) fn reason(kind: &str, id: &str, text: &str) -> String {
        format!("'{kind} ' || {id} || ' ' || {}", cut_text(text))
    }
}

/// Whose gate an `events` CTE reads.
pub(crate) enum Gate<'a> {
    /// Every row is of the queue this parameter names: the gate is read
    /// once per statement.
    Queue(&'a str),
    /// Rows of several queues (`ack_many`): each row's queue, its gate
    /// read per queue.
    PerRow,
}

/// The CTE `events` (one row, `n`, the notifications sent): sends the
/// event of each row of `rows` (a query yielding `q`, the queue, and `w`,
/// the wire text) on channel `channel` while the row's queue's gate is
/// live, in the order of `rows`, as `event <queue> <text>`. For texts that
/// fit one notification: every event's but a progress value's
/// ([`cte_in_pieces`]). A statement refers to it (a CTE nobody reads is
/// not run) where it is read whenever `rows` has a row.
pub(crate) fn cte(schema: &str, channel: &str, gate: Gate<'_>, rows: &str) -> String {
    let watched = watched(schema, gate);
    format!(
        "events AS ( \
           SELECT count(pg_notify({channel}, 'event ' || e.q || ' ' || e.w)) AS n \
           FROM ({rows}) e WHERE {watched} \
         )"
    )
}

/// [`cte`] for texts that may need more than one notification: each goes
/// in pieces of at most [`PIECE`], `eventpart` but the last. (A separate
/// form, as the series of pieces costs every call's planning.)
pub(crate) fn cte_in_pieces(schema: &str, channel: &str, gate: Gate<'_>, rows: &str) -> String {
    let watched = watched(schema, gate);
    format!(
        "events AS ( \
           SELECT count(pg_notify({channel}, \
                    CASE WHEN p.k < p.last THEN 'eventpart ' ELSE 'event ' END \
                    || e.q || ' ' || substr(e.w, p.k * {PIECE} + 1, {PIECE}))) AS n \
           FROM ({rows}) e CROSS JOIN LATERAL ( \
             SELECT k, (length(e.w) - 1) / {PIECE} AS last \
             FROM generate_series(0, (length(e.w) - 1) / {PIECE}) k \
           ) p \
           WHERE {watched} \
         )"
    )
}

/// The condition that `gate` is live, over rows `e`.
fn watched(schema: &str, gate: Gate<'_>) -> String {
    match gate {
        // A stable call on a parameter is made once, before anything else
        // of the CTE (a one-time filter): a queue nobody follows pays that
        // call alone.
        Gate::Queue(param) => format!("\"{schema}\".leaseq_events_watched({param}::text)"),
        // Per row: `ack_many`'s rows may be of several queues.
        Gate::PerRow => format!(
            "EXISTS (SELECT 1 FROM {} WHERE queue = e.q AND until > now())",
            table(schema)
        ),
    }
}

/// A backend handle's followed queues: the gate renewal of each queue with
/// a stream.
#[derive(Debug, Default)]
pub(crate) struct EventFeeds {
    feeds: Mutex<HashMap<String, Weak<Feed>>>,
}

impl EventFeeds {
    fn feeds(&self) -> MutexGuard<'_, HashMap<String, Weak<Feed>>> {
        self.feeds.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One queue's renewal task, stopped when the last stream holding it goes.
#[derive(Debug)]
struct Feed(tokio::task::AbortHandle);

impl Drop for Feed {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The statement that sets a queue's gate: $1 queue, $2 its life (ms).
fn gate_sql(schema: &str) -> String {
    format!(
        "INSERT INTO {t} AS g (queue, until) VALUES ($1, now() + $2 * interval '1 millisecond') \
         ON CONFLICT (queue) DO UPDATE SET until = greatest(g.until, EXCLUDED.until)",
        t = table(schema)
    )
}

/// Sets `queue`'s gate for [`GATE_TTL`] from now.
async fn open_gate(pool: &PgPool, sql: &str, queue: &str) -> Result<()> {
    let ttl = i64::try_from(GATE_TTL.as_millis()).unwrap_or(i64::MAX);
    sqlx::query(sql)
        .bind(queue)
        .bind(ttl)
        .execute(pool)
        .await
        .map_err(db("events: setting the gate"))?;
    Ok(())
}

/// Follows every handle on the schema, in every process: see the crate
/// docs, [Job events](crate#job-events).
#[async_trait]
impl Events for PgBackend {
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream> {
        let inner = &self.inner;
        let hub = inner.wakeups.events();
        // Events are sent only to connections listening when they commit:
        // the listener must be in before the gate opens.
        inner
            .wakeups
            .listening(inner.options.acquire_timeout)
            .await?;
        let live = inner
            .events
            .feeds()
            .get(queue.as_str())
            .and_then(Weak::upgrade);
        if let Some(feed) = live {
            return Ok(hub.subscribe(queue.as_str()).0.with_feed(feed));
        }
        let sql = gate_sql(&inner.options.schema);
        open_gate(&inner.pool, &sql, queue.as_str()).await?;
        let (stream, _) = hub.subscribe(queue.as_str());
        let mut feeds = inner.events.feeds();
        // Another subscribe of this handle may have started one meanwhile.
        if let Some(feed) = feeds.get(queue.as_str()).and_then(Weak::upgrade) {
            return Ok(stream.with_feed(feed));
        }
        let task = tokio::spawn(renew(
            inner.pool.clone(),
            sql,
            Arc::downgrade(&hub),
            queue.clone(),
        ));
        let feed = Arc::new(Feed(task.abort_handle()));
        feeds.retain(|_, f| f.strong_count() > 0);
        feeds.insert(queue.as_str().to_owned(), Arc::downgrade(&feed));
        Ok(stream.with_feed(feed))
    }
}

/// Sets `queue`'s gate again every [`GATE_REFRESH`] while the hub has a
/// stream of it.
async fn renew(pool: PgPool, sql: String, hub: Weak<EventHub>, queue: QueueName) {
    loop {
        tokio::time::sleep(GATE_REFRESH).await;
        if !hub.upgrade().is_some_and(|h| h.is_watched(queue.as_str())) {
            return;
        }
        if let Err(e) = open_gate(&pool, &sql, queue.as_str()).await {
            tracing::debug!(queue = %queue, error = %e,
                "leaseq-postgres: renewing the events gate failed");
        }
    }
}
