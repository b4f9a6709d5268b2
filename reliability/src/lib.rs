//! Reliability tests for every leaseq backend: the reference model run
//! against Redis and PostgreSQL, faults injected into real servers and into
//! running workers, hostile input, and a soak. The tests live in `tests/`;
//! this library holds what they share, usable from any backend's tests:
//! factories, a private `redis-server`, the storm ledger that judges a run,
//! and the hostile-input check.
//!
//! ```
//! use leaseq_core::ItemId;
//! use leaseq_reliability::ledger::Ledger;
//!
//! // A storm's verdict: every item whose enqueue returned Ok ends acked (or
//! // Dead) exactly once.
//! let ledger = Ledger::default();
//! ledger.enqueued(&[ItemId::new(1), ItemId::new(2)]);
//! ledger.acked(ItemId::new(1));
//! ledger.acked(ItemId::new(2));
//! assert!(ledger.verdict().is_ok());
//! ledger.acked(ItemId::new(2));
//! assert!(ledger.verdict().is_err()); // acked twice
//! ```
//!
//! Servers: Redis at `LEASEQ_REDIS_URL` (default `redis://127.0.0.1:6379`),
//! PostgreSQL at `LEASEQ_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). An unreachable server is a
//! loud `skipped: …` line, or a failure when `CI=true`. Every test works in
//! its own key prefix, schema or queue and removes it afterwards.

pub mod cancels;
pub mod env;
pub mod factories;
pub mod hostile;
pub mod idset;
pub mod ledger;
pub mod operated;
pub mod operator;
pub mod storm;

/// A private `redis-server` that tests may kill and restart.
pub use leaseq_testkit::redis_server;
