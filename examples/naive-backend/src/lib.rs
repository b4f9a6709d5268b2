//! A leaseq backend as a third party would write it from the docs of
//! `leaseq-core` and `leaseq-conformance` alone: one mutex over a map of
//! queues, each queue a map of items and one ordered map per state. It runs
//! the whole conformance suite with one `suite!` call
//! (`tests/conformance.rs`).
//!
//! It also carries seeded bugs, one per class of mistake a backend author
//! makes ([`Bug`]), chosen when the backend is built. `tests/bugs.rs` runs
//! the checks a bug breaks and asserts that the suite's message names the
//! mistake, not a symptom of it.
//!
//! ```
//! use std::sync::Arc;
//! use leaseq_core::{Backend, BackendExt, ManualClock, QueueName};
//! use leaseq_example_naive::{Bug, NaiveBackend};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leaseq_core::Result<()> {
//! let clock = ManualClock::new();
//! let backend = NaiveBackend::new(Arc::new(clock), Bug::None);
//! let queue = QueueName::new("emails")?;
//! backend.push(&queue, "hello").await?;
//! let lease = backend.claim_one(&queue, std::time::Duration::from_secs(30)).await?;
//! backend.ack(&lease.expect("one item").key).await?;
//! assert_eq!(backend.stats(&queue).await?.total(), 0);
//! # Ok(())
//! # }
//! ```

// Examples in the docs compile without warnings, as users copy them.
#![doc(test(attr(deny(warnings))))]

mod backend;
mod bug;
mod hooks;
mod queue;

pub use backend::NaiveBackend;
pub use bug::Bug;
