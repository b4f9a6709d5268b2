//! The in-process leaseq backend, and the reference implementation of the
//! [`leaseq_core::Backend`] contract that every other backend is compared with.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use leaseq_core::{Backend, BackendExt, ManualClock, NewItem, QueueName};
//! use leaseq_memory::MemoryBackend;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> leaseq_core::Result<()> {
//! let clock = ManualClock::new();
//! let backend = MemoryBackend::with_clock(Arc::new(clock.clone()));
//! let queue = QueueName::new("emails")?;
//!
//! backend.enqueue(&queue, vec![NewItem::new("hello"), NewItem::new("urgent").priority(9)]).await?;
//! let claimed = backend.claim_up_to(&queue, 10, Duration::from_secs(30)).await?;
//! assert_eq!(claimed.leases[0].payload, "urgent"); // higher priority first
//! for lease in &claimed.leases {
//!     backend.ack(&lease.key).await?;
//! }
//!
//! // A worker that outlives its lease is fenced out once the lease is reaped.
//! backend.push(&queue, "slow").await?;
//! let lease = backend.claim_one(&queue, Duration::from_secs(5)).await?.expect("one item");
//! clock.advance(Duration::from_secs(6));
//! assert_eq!(backend.reap(&queue).await?.requeued, 1);
//! assert!(backend.ack(&lease.key).await.unwrap_err().is_lease_lost());
//! # Ok(())
//! # }
//! ```
//!
//! # How it works
//! Each queue keeps its items in a hash map by id and one ordered set per
//! state: Ready by (priority descending, enqueue order), Scheduled by due
//! time, Leased by expiry, Dead by time of death. An item is in exactly the
//! index its state names, so every operation costs O(log n) per item, and a
//! reap walks the Leased index only as far as leases have expired: its cost
//! grows with expired leases, not with all leases. A retried item keeps its
//! place in enqueue order within its priority.
//!
//! Each queue has its own lock, held for one operation's index updates and
//! never across an `.await`; idle workers in
//! [`Backend::wait_for_work`](leaseq_core::Backend::wait_for_work) are woken
//! when work arrives, and no later than the earliest Scheduled item's due time.
//!
//! Time comes from the [`leaseq_core::Clock`] the backend is built with: the
//! system clock by default, a [`leaseq_core::ManualClock`] in tests. Payloads
//! are [`leaseq_core::Bytes`], so handing one out is a reference count, not
//! a copy.
//!
//! Not durable and not shared across processes. An index entry without its
//! item (which only test hooks can plant here) is removed when met, logged
//! with `tracing::warn!` and reported as a [`leaseq_core::Repair`].

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod backend;
mod control;
mod emitter;
mod events;
mod hash;
mod history;
mod hooks;
mod kept;
mod ops;
mod schedules;
mod state;

pub use backend::MemoryBackend;
