//! Model-based testing: random operation sequences run against a backend
//! and a plain reference model of the contract side by side, every answer
//! compared, failures shrunk to a minimal sequence.
//!
//! The model ([`Model`]) is sequential and pure: items with their state,
//! tokens, attempts, priorities, delays and dead letters, and time as a
//! plain number ([`Window`]). Each of its methods takes what the backend
//! answered to one operation, checks it against what the contract allows and
//! moves on; where the contract leaves the backend a choice (where a retried
//! item sits among items of its priority, which of the items that died in
//! one reap a redrive takes first) any allowed answer is accepted and
//! followed.
//!
//! The driver ([`check_model`], [`run_ops`]) draws sequences of [`Op`]s:
//! enqueue with priority, delay and dedup key; claim of 1 to 4 (or 1,000);
//! ack, extend, release and fail with the token a claim handed out (often a
//! stale one by then) and with forged tokens; reap; time passing; the
//! `expire_leases` and `make_due` hooks; stats, peek, redrive,
//! `redrive_item` and `remove_item` (of a live or a gone item) and purge;
//! `lease_fate` of a handed-out (or forged) lease, asked with a
//! `held_until` ahead of now or reached; `recover_claim` of an earlier
//! claim's spec (its live leases, field for field, in claim order).
//! After every step it compares `stats`, whether `queues` lists the queue
//! (exactly while the model holds an item) and, with test hooks, the raw
//! indexes (INV-1, and that the backend holds exactly the model's items);
//! every item is read back with `item` as often as configured.
//!
//! A backend that keeps its orders per shard ([`leaseq_core::Order::PerShard`],
//! the sharding layer) is judged the same way, but for the order of what a
//! claim, a peek or a redrive takes: there only membership and counts are
//! checked ([`Model::per_shard`]).
//!
//! Time stays deterministic (see [`Timing`]): on a manual clock deadlines
//! never fall on "now"; on a real clock leases and delays are ten minutes
//! and more, and run out only through the test hooks, which the model
//! treats as steps of their own ("every lease has run out", "every delay
//! has passed"). The model never assumes an exact server time: on a real
//! clock an operation's "now" is the window between two readings of the
//! backend's clock.
//!
//! ```
//! use std::sync::Arc;
//! use leaseq_conformance::model::{check_model, ModelConfig};
//! use leaseq_conformance::{BackendFactory, Outcome, TestBackend, Unavailable};
//! use leaseq_core::ManualClock;
//! use leaseq_memory::MemoryBackend;
//!
//! struct MemoryFactory;
//!
//! #[leaseq_core::async_trait]
//! impl BackendFactory for MemoryFactory {
//!     fn name(&self) -> &str {
//!         "memory"
//!     }
//!     async fn backend(&self) -> Result<TestBackend, Unavailable> {
//!         let clock = ManualClock::new();
//!         let backend = MemoryBackend::with_clock(Arc::new(clock.clone())).with_test_hooks();
//!         Ok(TestBackend::manual(Arc::new(backend), clock))
//!     }
//! }
//!
//! let verdict = check_model(&MemoryFactory, &ModelConfig::new(20));
//! assert_eq!(verdict, Ok(Outcome::Passed));
//! ```

mod control;
mod driver;
mod fate;
mod history;
mod hooks;
mod observe;
mod ops;
mod recover;
mod state;
mod window;

pub use driver::{check_model, run_ops, ModelConfig, SUITE_CASES, SUITE_MANUAL_CASES};
pub use ops::{op, ops, ItemSpec, Op, Span, Timing, Verb};
pub use state::{Entry, Model, Note, Slot, EXHAUSTED};
pub use window::Window;
