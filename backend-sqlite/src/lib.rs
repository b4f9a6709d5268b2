//! An embedded SQLite backend for leaseq, on `sqlx` and tokio: durable jobs
//! in one file, shared by every process on the machine that opens it.
//!
//! ```
//! use std::time::Duration;
//! use leaseq_core::{Backend, BackendExt, NewItem, QueueName};
//! use leaseq_sqlite::{SqliteBackend, SqliteOptions};
//!
//! # async fn example() -> leaseq_core::Result<()> {
//! // A file would be `sqlite://path/to/jobs.db` (created if missing).
//! let backend = SqliteBackend::connect("sqlite::memory:", SqliteOptions::new()).await?;
//! let queue = QueueName::new("emails")?;
//!
//! backend.enqueue(&queue, vec![NewItem::new(b"welcome #42".to_vec()).priority(5)]).await?;
//! if let Some(lease) = backend.claim_one(&queue, Duration::from_secs(30)).await? {
//!     // ... send the mail, then:
//!     backend.ack(&lease.key).await?;
//!     // The token is spent: a late second ack changes nothing.
//!     assert!(backend.ack(&lease.key).await.is_err_and(|e| e.is_lease_lost()));
//! }
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
//! #     .block_on(example()).unwrap();
//! ```
//!
//! # The file
//! `sqlite://path/to/jobs.db` opens (or creates) a file in WAL mode:
//! readers never block the writer, and any number of processes on the same
//! machine may open it at once (the capability `shared`). SQLite's locks
//! do not hold over network file systems: keep the file on a local disk.
//! `sqlite::memory:` is a database private to one handle and its clones,
//! neither durable nor shared, for tests.
//!
//! A file survives a crash of any process using it (every write that
//! returned is in the WAL file), so a file-backed backend reports itself
//! [`leaseq_core::Capabilities::durable`]; `sqlite::memory:` does not.
//! What a power failure (or an operating system crash) may take is chosen
//! with [`SqliteOptions::durability`]:
//!
//! - [`Durability::Full`] (the default, `synchronous=FULL`): nothing that
//!   was committed; each commit waits for an `fsync` of the WAL.
//! - [`Durability::Normal`] (`synchronous=NORMAL`): the transactions
//!   committed since the last checkpoint may be rolled back (enqueued
//!   batches disappear, acked items come back to be run again), but the
//!   file is never corrupt and reopens at an earlier consistent state.
//!   SQLite checkpoints when the WAL reaches 1,000 pages and when the last
//!   connection closes. See [`Durability`] for the details.
//!
//! Back the file up with [`SqliteBackend::backup`] (SQLite's `VACUUM
//! INTO`). A plain file copy taken while writers run can be torn;
//! [`SqliteBackend::verify`] finds that out, with SQLite's report, before
//! a restored copy is used.
//!
//! # Schema
//! The embedded migrations (run on connect unless
//! [`SqliteOptions::migrate_on_connect`] is off, each inside one `BEGIN
//! IMMEDIATE` transaction, so processes opening a new file at once take
//! turns) create one STRICT table, `leaseq_items`, one row per unfinished
//! item: `id` (`AUTOINCREMENT`: never reused, and the enqueue order),
//! `queue`, `state` (`ready`, `scheduled`, `leased`, `dead`), `priority`,
//! `payload`, `attempts`, `max_attempts`, `dedup_key`, `token` (16 bytes,
//! big-endian), `enqueued_at` (SQLite's clock at the enqueue, in the first
//! migration: every row has it; returned as
//! [`leaseq_core::Lease::enqueued_at`]), `available_at`,
//! `lease_expires_at`, `dead_at` (epoch milliseconds), `last_error`,
//! `cancel_requested`, and `progress` with the `progress_token` of the
//! lease that wrote it (migration 0015). Acked items are deleted.
//! Checks hold the core's limits (queue name, dedup key and reason
//! lengths, counters within `i32`, a token exactly when Leased). Partial
//! indexes serve each access path, so none reads finished or unrelated
//! rows:
//!
//! | index | columns | where | serves |
//! |---|---|---|---|
//! | `leaseq_items_ready` | queue, priority desc, id | `state = 'ready'` | claim |
//! | `leaseq_items_scheduled` | queue, available_at, id | `state = 'scheduled'` | claim of due items, promotion |
//! | `leaseq_items_leased` | queue, lease_expires_at, id | `state = 'leased'` | reap |
//! | `leaseq_items_dead` | queue, dead_at, id | `state = 'dead'` | redrive, peek |
//! | `leaseq_items_dedup` (unique) | queue, dedup_key | `dedup_key IS NOT NULL` | INV-9 |
//! | `leaseq_items_poison` | queue, state | `payload IS NULL OR attempts = 2147483647` | claim (poison) |
//!
//! A second table, `leaseq_requests`, remembers recent
//! [`leaseq_core::Backend::enqueue_once`] requests (their results, until
//! [`leaseq_core::limits::REQUEST_MEMORY`] passes), indexed by expiry for
//! the reaper. `leaseq_queue_limits` holds a row per queue with limits or a
//! pause; `leaseq_workers` one per live worker
//! ([`leaseq_core::WorkerRegistry`]), indexed by expiry.
//! `leaseq_retention` holds a row per queue whose retention policy is not
//! the default ([`leaseq_core::History`], migration 0016): per ending its
//! age and count bounds and how many are kept now, and the bounds on dead
//! letters (migration 0018). `leaseq_finished` holds the
//! kept items (id, queue, ending, `finished_at`, `enqueued_at`, attempts,
//! payload, `last_error`, result), indexed by (queue, ending,
//! `finished_at`, id): trimming and collection remove a prefix of it,
//! listing reads its end backwards. `leaseq_queue_counts` (migrations 0017
//! and 0018) holds a row per queue that completed anything or has dead
//! letters: its completions ([`leaseq_core::QueueStats::completed`]) and
//! how many dead letters it holds.
//!
//! # How each operation keeps the contract
//! SQLite has one writer per file and no `SKIP LOCKED`. Every write
//! statement takes the file's write lock before it reads anything, so
//! claimers in any number of processes are serialized by the file itself:
//! a claim sees every earlier commit and cannot hand out a live lease.
//! Within a process, all writes of a backend go through one connection.
//!
//! - **Claim** is one `UPDATE … FROM … RETURNING`: the heads of the Ready
//!   index and of the due Scheduled items, merged in claim order (priority,
//!   then id), the first `max` leased with `attempts + 1`, `lease_expires_at
//!   = now + ttl`, and the n-th the n-th token of the caller's
//!   [`leaseq_core::ClaimSpec`] (a blob of all tokens, cut by slot).
//! - **Ack, extend, release, give_back, fail** are one statement each,
//!   fenced by `id AND queue AND token AND lease_expires_at IS NOT NULL`
//!   through the primary key; no row means
//!   [`leaseq_core::Error::LeaseLost`]. **ack_many** is one statement for
//!   the whole batch when every lease in it is held: it deletes all of the
//!   batch's rows if each one's fence holds, else none, and sends no row
//!   back. Otherwise a second statement deletes each row whose own fence
//!   holds and returns those, so each lease gets its own answer. The
//!   leases go in as two parameters (a JSON array of ids and queues, a
//!   blob of the tokens).
//! - **Reap** moves up to 500 expired leases per statement, read as the
//!   prefix of the leased index that lies before now, and loops while a
//!   batch comes back full: its cost grows with the expired leases only
//!   (INV-7), and since each statement holds the write lock, concurrent
//!   reapers recover each lease once (INV-4). Due Scheduled items are
//!   promoted the same way.
//! - **Enqueue** of a batch without dedup keys is one `INSERT … SELECT`
//!   over `json_each` of the items' fields, with the payloads in one
//!   blob: three parameters whatever the batch's size (SQLite finds each
//!   parameter by a linear scan, so one per field would cost quadratic
//!   time to bind), and the ids, consecutive, from `last_insert_rowid`
//!   instead of one row back per item. With dedup keys it is one `BEGIN IMMEDIATE`
//!   transaction that looks the keys up and inserts what is new, so
//!   concurrent enqueues of one key create one item (INV-9).
//!   `enqueue_once` is one such transaction that also stores its results.
//! - **remove_item** is one `BEGIN IMMEDIATE` transaction: it clears the
//!   row's unique-for hold, then deletes the row (by the primary key, in
//!   any state) and returns the state it found. The delete trigger that
//!   holds an acked item's key so sees nothing to hold: a removed item's
//!   key is free at once.
//! - **Control** ([`leaseq_core::Control`]) is one statement per call.
//!   `cancel` sets `cancel_requested` on the row: a Leased row keeps its
//!   lease (and `extend` returns the flag); any other row is deleted by
//!   the trigger `leaseq_cancelled_end` in the same statement. That trigger
//!   also deletes a cancel-requested row in whatever statement moves it out
//!   of Leased (release, give_back, fail, snooze, reap), which returns the
//!   flag for its answer; an ack deletes it anyway, and the ack trigger
//!   holds no `unique_for` key for it. The reap writes its takeover traces
//!   first, as for every expired lease. `pause` sets `paused` in the
//!   queue's limits row: the plain claim leases nothing on a queue with a
//!   row, and the claim under the row answers `paused` inside its
//!   transaction, so a queue without limits or pause pays nothing for it.
//!   `progress` stores the value with the writing lease's token, and
//!   inspection shows it only while that token holds the item.
//! - **History** ([`leaseq_core::History`]) is kept by triggers, inside
//!   the statement that ends the item. `leaseq_finished_on_ack` runs
//!   before an ack's delete of a Leased row and, when the queue has a
//!   `leaseq_retention` row keeping that ending, copies it to
//!   `leaseq_finished` (Completed, or Cancelled when a cancel was
//!   requested); a queue without a row pays one probe of that table per
//!   acked row. `leaseq_cancelled_end` keeps a cancelled row as it was
//!   before its statement (attempts, last error) before deleting it. An
//!   insert into `leaseq_finished` counts itself in the policy row and
//!   trims its ending to the count bound, oldest first; a delete uncounts
//!   itself. `complete` is one `BEGIN IMMEDIATE` transaction: the ack,
//!   then the result on the row it kept, if any. `remove_item` moves a
//!   Leased row out of Leased before deleting it, so a removal keeps
//!   nothing; `purge` deletes the queue's kept items after its items (the
//!   policy stays); `delete_queue` deletes the policy too. `collect` reads
//!   the policy, trims to the counts and deletes by age in statements of
//!   1,000 rows through the order index: it costs what it removes, and as
//!   each statement holds the write lock, racing collects remove each item
//!   once.
//! - **Completions** are counted by the trigger
//!   `leaseq_counted_on_delete`, in the statement that acks (ack,
//!   `ack_many`, complete): the delete of a Leased row that no cancel was
//!   requested on adds one to the queue's row in `leaseq_queue_counts`.
//!   `remove_item`, `purge` and `delete_queue` move Leased rows out of
//!   Leased before deleting them, so they count nothing; a purge keeps the
//!   count and `delete_queue` deletes the row.
//! - **Dead letters** are counted in the same row by triggers in the
//!   statement that moves a row into or out of Dead (`leaseq_dead_counted`
//!   on updates of `state`, `leaseq_counted_on_delete` on deletes).
//!   `collect` removes the oldest beyond [`leaseq_core::Retention::dead`]'s
//!   count (as many as the counter says are too many), then those that
//!   died before its age, in statements of 1,000 rows through the dead
//!   index: it costs what it removes. A delete holds a `unique_for` key
//!   only when it is an ack (of a Leased row, migration 0018's
//!   `leaseq_hold_after_ack`), so a collected dead letter frees its key.
//! - **Time** is SQLite's clock, `unixepoch('subsec')` in milliseconds,
//!   read inside each statement (fixed for the whole statement). Every
//!   process on the file runs on one machine, so they share that clock;
//!   client-side timers never decide who owns an item.
//! - **Repairs.** A row served as Ready without its payload (what the test
//!   hook `plant_dangling_ready` writes) or with an attempt counter at
//!   `i32::MAX` is poison. The claim statement passes over it and brings
//!   it back; a second statement deletes the first kind and quarantines
//!   the second to Dead. Each is logged and reported in
//!   `Claimed::repairs`, and takes no slot.
//! - **Errors.** `SQLITE_BUSY` and `SQLITE_LOCKED` (another process held
//!   the lock past [`SqliteOptions::busy_timeout`]) and a connection that
//!   could not be had are [`leaseq_core::Error::Unavailable`]: nothing was
//!   applied and the call may be sent again
//!   ([`leaseq_core::Error::is_retryable`]). A
//!   transaction that fails before its commit is rolled back, so it is
//!   `Unavailable` too. Anything else is [`leaseq_core::Error::OutcomeUnknown`].
//!
//! # Wake-ups
//! Enqueue, release, give_back, reap, redrive, `redrive_item`, resume,
//! snooze (to Ready), `run_now` and `run_all_now` wake the waiters of their
//! queue in this process at once (through every handle on the same file).
//! Calls that may end an item (ack, `ack_many`, complete, an immediate
//! cancel, and the release, give_back, fail, snooze or reap of a
//! cancel-requested lease) fire [`leaseq_core::History::finished_signal`]
//! for the waiters of their queue in this process; whether the statement
//! kept anything is known only to its trigger, so a queue nobody waits on
//! pays a look-up in the in-process hub and no SQL.
//! SQLite cannot signal another process: waiters also wake after
//! [`SqliteOptions::poll_interval`] (250 ms by default), which bounds how
//! late work enqueued by another process is seen.
//!
//! Delivery is at-least-once: a worker that outlives its lease may run an
//! item another worker also runs, so handlers should be idempotent.
//!
//! # Job events
//! [`leaseq_core::Events::subscribe`] streams a queue's job events from
//! this process only. Every handle on the same file in the process shares
//! one [`leaseq_core::events::EventHub`] (a process-wide registry keyed by
//! the file, as the wake-ups are), so a stream hears what any of them
//! does; SQLite cannot signal another process, and a change made by
//! another process on the file is not delivered (its endings are in the
//! history, [`leaseq_core::History`]). An in-memory database's events are
//! its own.
//!
//! Each write sends its events after its statement or transaction has
//! committed, from what that returned, one per job it changed: enqueue,
//! `enqueue_once` (not a request sent again) and a schedule's fire send
//! Enqueued for each item they made (not for one they deduplicated); claim
//! sends Started; ack, `ack_many` and complete send Completed (complete
//! with its result), or Cancelled for a cancel-requested lease;
//! release, give_back and snooze send Released, or Dead ("attempts
//! exhausted") for a release on the last attempt; fail sends Dead with
//! its reason; the reap sends Failed ("lease expired") or Dead ("lease
//! expired on final attempt"); progress sends Progress; cancel sends
//! Cancelled when it ends the item at once. A cancel-requested lease that
//! ends in a release, give_back, fail, snooze or reap (its row deleted by
//! the trigger `leaseq_cancelled_end`) sends Cancelled: those statements
//! return the flag. Removal, purge, redrive, promotion, repairs and
//! [`SqliteBackend::enqueue_in`] (whose commit the backend does not see)
//! send none.
//!
//! A write on a queue nobody in this process subscribes to checks the hub
//! (one atomic load while no stream is open at all) and runs as without
//! events: no lock, no statement and no returned column more. A write on a
//! watched queue holds the file's order lock (one per file in the process)
//! from before its statement until its events are sent, so one job's
//! events go out in the order its changes committed, whichever handle made
//! them; the ack, `ack_many`, give_back and fail then use the forms of
//! their statements that return the cancel flag. A stream that falls more
//! than [`leaseq_core::events::EVENT_BUFFER`] events behind loses the
//! oldest, is told with [`leaseq_core::Error::Lagged`], and goes on.

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod backend;
mod control;
mod control_sql;
mod enqueue;
mod events;
mod history;
mod history_sql;
mod hooks;
mod limits;
mod notify;
mod ops;
mod options;
mod pause;
mod registry;
mod rows;
mod schedules;
mod sql;
mod transactional;

pub use backend::SqliteBackend;
pub use options::{Durability, SqliteOptions};
/// The `sqlx` this backend is built on, for [`SqliteBackend::enqueue_in`]:
/// the caller's transaction must be of this version's types.
pub use sqlx;
pub use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
