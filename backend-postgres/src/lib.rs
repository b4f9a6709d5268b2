//! A PostgreSQL backend for leaseq, on `sqlx` and tokio.
//!
//! ```
//! use std::time::Duration;
//! use leaseq_core::{Backend, BackendExt, NewItem, QueueName};
//! use leaseq_postgres::{PgBackend, PgOptions};
//!
//! # async fn example() -> leaseq_core::Result<()> {
//! let url = std::env::var("LEASEQ_DATABASE_URL")
//!     .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
//! // Creates schema `doc_example` and its table on first use.
//! let options = PgOptions::new().schema("doc_example");
//! # let backend = match PgBackend::connect(&url, options.clone()).await {
//! #     Ok(b) => b,
//! #     Err(e) => { eprintln!("skipped: no PostgreSQL at {url}: {e}"); return Ok(()); }
//! # };
//! # /*
//! let backend = PgBackend::connect(&url, options).await?;
//! # */
//! let queue = QueueName::new("emails")?;
//!
//! backend.enqueue(&queue, vec![NewItem::new(b"welcome #42".to_vec()).priority(5)]).await?;
//! if let Some(lease) = backend.claim_one(&queue, Duration::from_secs(30)).await? {
//!     // ... send the mail, then:
//!     backend.ack(&lease.key).await?;
//!     // The token is spent: a late second ack changes nothing.
//!     assert!(backend.ack(&lease.key).await.is_err_and(|e| e.is_lease_lost()));
//! }
//! # backend.admin()?.purge(&queue).await?;
//! # sqlx::query("DROP SCHEMA doc_example CASCADE").execute(backend.pool()).await.ok();
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
//! #     .block_on(example()).unwrap();
//! ```
//!
//! # Schema
//! Everything lives in one schema ([`PgOptions::schema`], default `leaseq`),
//! so applications sharing a database use one schema each. The embedded
//! migrations (applied by [`PgBackend::migrate`], and on connect unless
//! turned off) create it, keep their history in `<schema>._sqlx_migrations`,
//! and take an advisory lock per schema, so concurrent migrations from many
//! processes are safe and a second run is a no-op.
//!
//! One table, `leaseq_items`, one row per unfinished item: `id` (from the
//! sequence `leaseq_item_id`; it is also the enqueue order), `queue`, `state`
//! (`ready`, `scheduled`, `leased`, `dead`), `priority`, `payload`,
//! `attempts`, `max_attempts`, `dedup_key`, `token` (uuid), `enqueued_at`
//! (the server's `now()` at the enqueue, in the first migration: every row
//! has it; returned as [`leaseq_core::Lease::enqueued_at`]),
//! `available_at`, `lease_expires_at`, `dead_at`, `last_error`,
//! `cancel_requested` (only ever true on a Leased row), `progress` and
//! `progress_token` (the token of the lease that wrote it). Acked items
//! are deleted.
//! Partial indexes serve each access path, so none reads finished or
//! unrelated rows:
//!
//! | index | columns | where | serves |
//! |---|---|---|---|
//! | `leaseq_items_ready` | queue, priority desc, id | `state = 'ready'` | claim |
//! | `leaseq_items_scheduled` | queue, available_at, id | `state = 'scheduled'` | claim of due items, promotion |
//! | `leaseq_items_leased` | queue, lease_expires_at, id | `state = 'leased'` | reap |
//! | `leaseq_items_dead` | queue, dead_at, id | `state = 'dead'` | redrive, peek |
//! | `leaseq_items_dedup` (unique) | queue, dedup_key | `dedup_key IS NOT NULL` | INV-9 |
//! | `leaseq_items_poison` | queue, state | `payload IS NULL OR attempts = 2147483647 OR (exhausted AND state IN ('ready', 'scheduled'))` (`exhausted`: a stored `attempts >= max_attempts`, which the planner can count) | claim (poison) |
//!
//! The last one is empty unless something went wrong (see Repairs below).
//! Checks hold the core's limits: `max_attempts` 1 to
//! [`leaseq_core::limits::MAX_ATTEMPTS`], `attempts` at least 0, a queue
//! name of 1 to [`leaseq_core::QueueName::MAX_LEN`] bytes, a dedup key of
//! 1 to [`leaseq_core::limits::MAX_DEDUP_KEY_LEN`] bytes, a `last_error`
//! of at most [`leaseq_core::limits::MAX_REASON_LEN`] bytes (the last three
//! added `NOT VALID`: rows from before them are not rescanned).
//!
//! `leaseq_retention` holds a queue's retention policy
//! ([`leaseq_core::History`]), one row per queue whose policy is not the
//! default, and `leaseq_finished` its kept items (queue, id, ending,
//! `finished_at`, `enqueued_at`, attempts, payload, `last_error`, result),
//! with the index `leaseq_finished_order` on (queue, ending, finished_at,
//! id).
//!
//! `leaseq_completions` holds the completion counters (see Completion
//! counter below).
//!
//! `leaseq_event_listeners` holds the gate of job events: a row per queue
//! a subscriber follows, with the time it stays live until (see Job events
//! below).
//!
//! `leaseq_queue_limits` holds, per queue, its global limits and its pause
//! (both read by the claim statement's one probe of the row), and
//! `leaseq_workers` the live workers (id, entry as JSON text, expiry).
//!
//! A further table, `leaseq_requests`, remembers recent
//! [`leaseq_core::Backend::enqueue_once`] requests: primary key `(queue,
//! request)`, the first call's `ids` and `deduplicated` flags (arrays in
//! batch order), and `expires_at` (`now()` +
//! [`leaseq_core::limits::REQUEST_MEMORY`]), indexed by `(queue,
//! expires_at)` for the reaper.
//!
//! # How each operation keeps the contract
//! - **Claim** is one statement: the head of the Ready index and the head
//!   of the due Scheduled items are each locked `FOR UPDATE SKIP LOCKED`
//!   through their own index, merged in claim order (priority, then id) and
//!   the first `max` updated to Leased with `attempts + 1` and
//!   `lease_expires_at = clock_timestamp() + ttl`, the clock read once by
//!   the statement after its snapshot (see Time). The tokens come from the caller's
//!   [`leaseq_core::ClaimSpec`], passed as a `uuid[]`: the rows are
//!   numbered in claim order, so the `i`-th lease gets `spec.token(i)`.
//!   Concurrent claimers skip each other's rows instead of waiting. Both
//!   heads pass over poison (see Repairs), so it takes no slot.
//! - **Ack, extend, release, give_back, fail** are one statement each,
//!   fenced by `id AND queue AND token AND lease_expires_at IS NOT NULL`
//!   (a row with a token and an expiry is Leased, by the table's check;
//!   naming no state keeps the planner on the primary key, off the leased
//!   index); zero rows (or an id no row can have, over `i64::MAX`) means
//!   [`leaseq_core::Error::LeaseLost`]. Release, give_back and reap clear
//!   the token, so a stale holder can never match again. None of them adds
//!   to `attempts` (give_back takes one off), so none can overflow it.
//! - **Reap** locks up to 500 leases expired at `now()` through the leased
//!   index (`SKIP LOCKED`; the lock re-checks `state = 'leased' AND
//!   lease_expires_at <= now()` on the row's latest version, so a row acked
//!   or extended in between is left alone) and updates them, by id, in the
//!   same statement; it loops while batches come back full, each batch
//!   starting after the `(lease_expires_at, id)` where the last one
//!   stopped. So one call walks the index once: the entries that ended
//!   leases leave behind (acked, released, reaped by the batch before)
//!   until vacuum removes them are stepped over once per call, not once per
//!   batch. Its cost grows with expired leases (and those leftovers) only,
//!   and concurrent reapers recover each lease once. It also promotes due
//!   Scheduled items to Ready in bounded batches, walking the scheduled
//!   index the same way; redrive walks the dead index so. `redrive_item`
//!   is one statement: it locks its row (found by the primary key, never
//!   through the dead index), moves it only if that row is Dead, and
//!   answers with the state it found, so `false` (another state) and
//!   `NotFound` are told apart in the same step.
//!   `remove_item` is one `DELETE` of its row by the primary key, in any
//!   state, returning the state it found; unlike an ack it holds no dedup
//!   key.
//! - **Stats** counts each state (due Scheduled items apart) through its
//!   own partial index, up to [`PgOptions::stats_exact_up_to`] plus one
//!   (default 10,000): exact below that. A state holding more is estimated
//!   from a sample of the table's pages (`TABLESAMPLE SYSTEM`, about 200
//!   pages; every page of a smaller table, where the estimate is exact),
//!   never below the count it read. So its cost is bounded whatever the
//!   queue holds: for a queue of 1,000,000 items it reads some 370 pages,
//!   where counting them read every page of the table (17,544, 0.5 s).
//! - **Purge and delete_queue** find the queue's rows through the four
//!   state indexes at once (a `BitmapOr` of the partial indexes, from
//!   `queue = $1` and the OR of the four states): their cost follows the
//!   queue's rows, not the table's.
//! - **Enqueue** inserts a batch with `unnest`; the unique dedup index with
//!   `ON CONFLICT DO NOTHING` makes concurrent enqueues of one key create
//!   one row, whose id the others get back. A batch in which no item has a
//!   dedup key takes a plain `INSERT … SELECT FROM unnest` instead: no
//!   conflict arbitration, and its ids come back as one array.
//! - **Control** ([`leaseq_core::Control`]). `cancel` is one statement: it
//!   locks the row by the primary key (reading its latest version) and
//!   either deletes it (Ready, Scheduled, Dead: as `remove_item`, no key
//!   held) or sets `cancel_requested` on a Leased row. Every statement that
//!   ends a lease then ends the item Cancelled in that same statement: the
//!   ack's `DELETE` holds no unique-for key when its row has the flag (its
//!   `RETURNING` reads the version it deleted); release, give_back, fail and
//!   snooze lock the fenced row first and delete it instead of moving it
//!   when it has the flag; the reap deletes flagged expired leases in the
//!   batch that requeues the others, leaving the same takeover trace, and
//!   counts them in [`leaseq_core::ReapReport::cancelled`]. `extend`
//!   returns the flag. `pause` and `resume` write `paused` on the queue's
//!   limits row, which the claim statement already reads by its primary
//!   key: on a paused queue its heads lock nothing and it answers
//!   [`leaseq_core::Claimed::paused`]; an unpaused claim reads nothing
//!   more than before. `progress` is a fenced `UPDATE`; `item` and `peek`
//!   show it only while the row is Leased under the token that wrote it,
//!   and the statements that end a lease clear it. `run_now` locks its row
//!   by the primary key; `run_all_now` walks the scheduled index from the
//!   earliest due time in keyset batches, as promotion does.
//! - **History** ([`leaseq_core::History`]). Every statement that ends an
//!   item (ack, `ack_many`, `complete`, and for a cancel-requested lease
//!   release, snooze, give_back, fail and the reap, and `cancel` of a
//!   waiting item) copies the rows it deleted into `leaseq_finished` in
//!   that same statement, joined to the queue's policy row by its primary
//!   key: a queue that keeps nothing has no row, so the ack pays one probe
//!   of a table that holds only the queues that keep, and records and
//!   notifies nothing. A kept ending sends `done <queue>` on the
//!   notification channel, which fires [`leaseq_core::History::finished_signal`]
//!   in every process. `collect` walks the order index from each ending's
//!   oldest item and stops at the first one its age bound keeps, in
//!   batches locked `SKIP LOCKED` (racing collects remove each item once):
//!   it costs what it removes. A count bound cuts `finished` at once; the
//!   rows past it go at the next `collect` (run by every worker's reaper)
//!   and at a `set_retention`. How many lie past it is read from
//!   `leaseq_kept_counts` (migration 0020: each queue's kept items per
//!   ending, in stripes as the completion counter, added to by the
//!   statements that keep items and taken from by the ones that remove
//!   them), so the count collect also costs what it removes. A queue's
//!   collects take turns on a transaction-level advisory lock, so two
//!   never remove the same excess twice. Until then `finished_item` still
//!   answers them.
//!   Purge deletes the kept items, `delete_queue` the policy row too.
//!   A bound on dead letters ([`leaseq_core::Retention::dead`]) is stored
//!   on the same row; `collect` removes the dead letters past it through
//!   the dead index, oldest death first (a count bound walks the bound's
//!   newest dead letters for the edge, so it costs up to the bound, not
//!   what it removes; an age stops at the first death it keeps), deleting
//!   each row as `remove_item` does.
//! - **Completion counter** ([`leaseq_core::QueueStats::completed`]).
//!   The statements of ack, `ack_many` and `complete` add what they
//!   completed to `leaseq_completions` in that same statement (an upsert
//!   of one row per queue they touched). A single row per queue would
//!   make concurrent acks wait on its lock until each commits, so each
//!   queue has up to 16 stripes and a statement adds to the stripe of its
//!   server process (`pg_backend_pid() % 16`): acks on different pool
//!   connections seldom meet. `stats` sums the stripes; `delete_queue`
//!   deletes them, a purge keeps them.
//! - **Live workers** ([`leaseq_core::WorkerRegistry`]). `register` is one
//!   upsert that also deletes expired entries (through the expiry index,
//!   skipping rows another call is deleting); `workers` deletes them the
//!   same way and lists the rest. Their cost follows the number of workers.
//! - **Lost replies.** `recover_claim` is one `SELECT` of the queue's live
//!   leases (`lease_expires_at > now()`, through the leased index) whose
//!   token lies in the spec's family: uuids compare as big-endian bytes, so
//!   the family (the top 96 bits) is one range and token order is claim
//!   order. Its cost grows with the queue's live leases; it runs only after
//!   a lost reply. `lease_fate` is one `SELECT`: held while the row is
//!   leased under the token, otherwise finished (with the row's state, or
//!   none when it is gone) if `now()` is before the caller's `held_until`,
//!   otherwise lost. `enqueue_once` runs in one transaction: an
//!   `INSERT … ON CONFLICT DO UPDATE` on the request's row (a concurrent
//!   resend waits on that row until the first call commits), then either
//!   the stored results (nothing written; a batch of another size is
//!   [`leaseq_core::Error::InvalidInput`]) or the enqueue statements and the
//!   results stored on the row, and the commit. `reap` deletes request rows
//!   whose memory ran out, in bounded batches through the expiry index.
//! - **Errors.** A call that certainly did not run or was rolled back (no
//!   connection to be had, connection refused, SQLSTATE classes 08, 40 but
//!   40003, 53 and 57) is [`leaseq_core::Error::Unavailable`]: sending it
//!   again is safe. Anything else, above all a connection lost while a
//!   statement was in flight, is [`leaseq_core::Error::OutcomeUnknown`]: it may
//!   have been applied. An `enqueue_once` that fails before its commit is
//!   `Unavailable` (its transaction is rolled back).
//! - **Time** is always the server's: `now()` in every statement,
//!   `clock_timestamp()` for [`leaseq_core::Backend::now`] and for the
//!   claim's lease stamp. `now()` is the transaction's start, which can
//!   come before an enqueue that commits ahead of the claim's snapshot; a
//!   lease stamped with it would predate an item the claim sees.
//! - **Repairs.** A table has no separate index that could hold an id
//!   without its item; the equivalent is a row still served as Ready whose
//!   payload is gone (NULL), which is what the test hook
//!   `plant_dangling_ready` writes. The other poison a typed, checked row
//!   can hold is an attempt counter at `i32::MAX` (the largest `integer`),
//!   which a claim cannot add one to, and more generally a Ready or
//!   Scheduled row whose attempts already reached its maximum (written
//!   around the backend, or its maximum lowered): a claim would lease it on
//!   an attempt past its last. All are quarantined, never
//!   contagious: the claim's heads pass over them, and the same statement
//!   finds up to [`leaseq_core::limits::MAX_CLAIM`] of the queue's Ready
//!   and due ones through the poison index, deletes the rows without a
//!   payload and moves the others to Dead (`last_error` "quarantined:
//!   attempt counter at its limit" for a counter at `i32::MAX`, "attempts
//!   exhausted" for the others, their attempts unchanged). Each is logged
//!   with `tracing::warn!`
//!   and reported in `Claimed::repairs`; none takes a slot, so the healthy
//!   items behind them are claimed by the same statement.
//!
//! # Wake-ups
//! Enqueue, release, reap, redrive, `redrive_item`, snooze, `resume`,
//! `run_now` and `run_all_now` send
//! `pg_notify('leaseq_<schema>', queue)` inside their own statement, once
//! per statement, only when something became claimable. Each backend (all its clones) keeps one
//! `LISTEN` connection, started on the first
//! [`leaseq_core::Backend::wait_for_work`], which wakes the waiters of that
//! queue. The same channel carries `cancel <queue>` (a cancel request on a
//! lease) and `done <queue>` (an ending kept); no queue name holds a space. A notification is a hint: waiters also wake after
//! [`PgOptions::poll_interval`], and after the listener reconnects.
//! A notification heard while a claim on its queue runs (whose snapshot
//! may predate the item), or after that claim and before its caller waits,
//! is not lost: each claim notes the queue's count of notifications before
//! its statement, and `wait_for_work` returns at once when the count has
//! moved since the latest claim on that queue began (or the latest wait on
//! it returned).
//!
//! # Round trips
//! A claim or an enqueue is one statement, one round trip. The pool the
//! backend builds pings a connection before handing it out only when it sat
//! idle longer than [`PgOptions::ping_idle_after`] (sqlx pings before every
//! use by default).
//!
//! # Job events
//! [`leaseq_core::Events`] is offered, and a subscriber hears the changes
//! made by every handle on the schema, in any process. Each statement that
//! changes a job sends its events with `pg_notify` on the schema's channel
//! inside that statement, as `event <queue> <text>` (the text of
//! [`leaseq_core::events::JobEvent::to_wire`], built in SQL): they are
//! delivered when the statement's transaction commits (an enqueue inside
//! the caller's transaction, [`PgBackend::enqueue_in`], reports at its
//! commit, and nothing if it rolls back), and PostgreSQL delivers the
//! notifications of different transactions in commit order, so one job's
//! events arrive in the order of its changes. A payload holds under 8,000
//! bytes: a result is carried up to
//! [`leaseq_core::events::MAX_EVENT_RESULT`] bytes (else marked elided) and
//! a reason is cut to [`leaseq_core::events::MAX_EVENT_TEXT`], so every
//! event fits one notification except a progress value of more than about
//! 3,800 bytes, which goes as `eventpart` notifications and a last `event`
//! one, joined by the listener (one transaction's notifications arrive
//! together).
//!
//! The gate: statements send events only while their queue's row in
//! `leaseq_event_listeners` is live (`until > now()`). A handle with a
//! subscriber sets it 30 s ahead, after its `LISTEN` is in force and
//! before `subscribe` returns, and renews it every 10 s while a stream of
//! the queue is open. A queue nobody follows pays, per statement that has
//! an event to tell, one call of `leaseq_events_watched(queue)` (a
//! PL/pgSQL function probing that table's primary key; a call costs the
//! statement's planning less than a subquery would), and in `ack_many` one
//! probe per lease; no event text is built and nothing is sent.
//! On a followed queue every changing statement notifies, and PostgreSQL
//! serializes the commits of notifying transactions (see below): a
//! followed queue's acks and claims commit one at a time.
//!
//! Per backend handle, the `LISTEN` connection of the wake-ups reads the
//! events into the handle's [`leaseq_core::events::EventHub`], which every
//! stream of the handle reads. Delivery is at most once, to the streams
//! open when the change commits. Limits, all of them losses:
//! - while the listener's connection is down (it reconnects with backoff)
//!   nothing reaches it, and PostgreSQL keeps no notification for a
//!   session that was not listening: the events sent meanwhile are lost,
//!   and the hub cannot tell which;
//! - a stream more than [`leaseq_core::events::EVENT_BUFFER`] events behind
//!   loses the oldest and is told with [`leaseq_core::Error::Lagged`];
//! - a process that cannot renew the gate for 30 s lets it lapse: no events
//!   are sent until a renewal;
//! - a notification that does not read as an event is logged and skipped;
//! - a failure reason holding a NUL character is stored, and reported,
//!   with U+FFFD in its place.
//!
//! # Operating a busy queue
//! Every item is inserted, updated a few times and deleted within seconds,
//! so the table and its indexes collect dead tuples fast. An ended lease
//! leaves its entry in the leased index, at its expiry, until vacuum removes
//! it; a claimed item leaves its entry at the head of the Ready index. The
//! reap's walk over the expired leases and the claim's walk from the head
//! of the Ready index step over every such entry until then. After
//! 1,000,000 items went through a table with autovacuum off, the first
//! empty reap took 0.5 s (it visits each entry's row to learn that it is
//! gone, and marks the entry), later ones 10-60 ms (they still read the
//! 39 MB of marked entries, some 4,900 index pages); after a `VACUUM` the
//! same reap reads 6 pages and takes under 1 ms. With autovacuum on, the
//! figures after the same churn were 185 ms, then 6-7 ms.
//! An open transaction anywhere in the database (a long report, a backup,
//! an idle-in-transaction session) keeps those rows from counting as gone,
//! and then every walk visits every row, every time.
//!
//! What fixes it is vacuum, often:
//! - **Autovacuum on** (the server's default): the migration sets per-table
//!   settings for this table (`autovacuum_vacuum_scale_factor = 0`,
//!   `autovacuum_vacuum_threshold = 5000`, the same for inserts,
//!   `autovacuum_vacuum_cost_delay = 0`, `fillfactor = 70` for HOT
//!   updates), so a worker vacuums it after 5,000 dead rows, but workers
//!   look at each database only once per `autovacuum_naptime` (default
//!   1 min): at 20,000 items a second, set `autovacuum_naptime = 10s` (or
//!   less) on the server, as a per-table setting cannot.
//! - **The reaper vacuums** ([`PgOptions::vacuum_after`], on by default):
//!   at each look at the server's statistics (every
//!   [`PgOptions::planner_check`], 2 s) it starts `VACUUM (SKIP_LOCKED)` of
//!   the items table, and of `leaseq_finished`, once either holds 10,000
//!   dead rows, in a task of its own. This keeps the walks short with
//!   autovacuum off or behind, as long as a worker's reaper runs against
//!   the schema and the connecting role owns the tables. It skips a table
//!   another vacuum is working on.
//! - **Otherwise** (no reaper, the tables owned by another role, or
//!   `vacuum_after(None)`): run `VACUUM ANALYZE <schema>.leaseq_items`
//!   yourself, every few seconds to a minute depending on the rate (it
//!   takes no lock that blocks the queue's statements, and with nothing to
//!   do it returns in milliseconds).
//!
//! A queue that keeps finished items ([`leaseq_core::History`]) churns
//! `leaseq_finished` the same way: a row inserted at each kept ending and
//! deleted by the collection once the retention lets it go. That table
//! keeps the server's autovacuum settings (a vacuum once a fifth of its
//! rows are dead, at most once per `autovacuum_naptime`), so it holds about
//! one retention period of live rows and one naptime of dead ones; the
//! reaper vacuums it past [`PgOptions::vacuum_after`] dead rows like the
//! items table. Without either it grows for good, and its indexes with it:
//! vacuum it with `leaseq_items`. (`benches/RESULTS.md`, "Finished items": 200 jobs
//! a second kept for a minute, 10 minutes.)
//!
//! Plans also rest on the row count the planner believes the table holds,
//! which only `ANALYZE` and `VACUUM` set. A `VACUUM` of an emptied table
//! records about no rows; when a burst then fills it, the planner takes the
//! Ready set for one row and every claim reads and sorts all of it (100,000
//! Ready items drained at under 1,000 a second instead of about 20,000, on
//! a 2-core machine). Autovacuum's analyze fixes that within
//! `autovacuum_naptime`; the reaper does not wait for it: every
//! [`PgOptions::planner_check`] (2 s) it compares the planner's count with
//! the live rows the server counts, and runs `ANALYZE` on the table when
//! the count is under a quarter of them. Vacuum by hand with `ANALYZE`.
//!
//! Keep long-running transactions away from the database: an open
//! transaction anywhere holds back vacuum for every table. `NOTIFY`
//! serializes committing transactions that notify; enqueue in batches
//! to keep that cheap.
//!
//! Delivery is at-least-once: a worker that outlives its lease may run an
//! item another worker also runs, so handlers should be idempotent.

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod backend;
mod begin;
mod completions;
mod control;
mod events;
mod history;
mod hooks;
mod limits;
mod notify;
mod ops;
mod options;
mod registry;
mod rows;
mod schedules;
mod sql;
mod transactional;
mod upkeep;

pub use backend::PgBackend;
pub use options::PgOptions;
/// The `sqlx` this backend is built on, for [`PgBackend::enqueue_in`]: the
/// caller's transaction must be of this version's types.
pub use sqlx;
pub use sqlx::postgres::{PgConnectOptions, PgPool};
