//! The leaseq contract: the [`Backend`] storage trait, the types that travel
//! through it, typed errors, and the time seam.
//!
//! ```
//! use leaseq_core::{ClaimSpec, Error, NewItem, QueueName};
//! use std::time::Duration;
//!
//! // Names, items and claims are validated where they are made.
//! let queue = QueueName::new("emails")?;
//! let item = NewItem::new(b"hello".to_vec()).priority(10).max_attempts(3);
//! let claim = ClaimSpec::new(32, Duration::from_secs(30))?;
//! assert_eq!((queue.as_str(), item.priority, claim.max()), ("emails", 10, 32));
//!
//! // Bad input is a typed error, never a panic.
//! assert!(matches!(ClaimSpec::new(0, Duration::from_secs(1)), Err(Error::InvalidInput { .. })));
//! # Ok::<(), Error>(())
//! ```
//!
//! # The contract in short
//! An item is in exactly one state: Ready, Scheduled, Leased or Dead; ack
//! removes it. A claim hands out a [`Lease`] under a fresh [`LeaseToken`];
//! only that token can ack, extend, release or fail the item, so a worker that
//! outlived its lease gets [`Error::LeaseLost`] and changes nothing. Reaping
//! expired leases is safe from any number of processes at once. Delivery is
//! at-least-once: handlers should be idempotent.
//!
//! Backends live in their own crates (`leaseq-memory`, `leaseq-redis`,
//! `leaseq-postgres`, `leaseq-sqlite`); `leaseq-conformance` proves each
//! keeps the contract, and any other backend too (`docs/backends.md` in the
//! repository tells how to write one).

// Examples in the docs compile without warnings, as users copy them; an
// example may define a function it shows without calling it.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

mod awaited;
mod backend;
pub mod backoff;
mod capabilities;
mod clock;
mod codec;
mod error;
pub mod events;
mod ext;
pub mod finished;
mod gauges;
pub mod groups;
mod ids;
mod item;
pub mod layer;
pub mod limits;
pub mod queue_limits;
pub mod redact;
mod report;
pub mod schedule;
pub mod settle;
pub mod signal;
pub mod spans;
pub mod stored;
pub mod testing;
mod typed;
mod worker;

pub use awaited::Awaited;
pub use backend::Backend;
pub use capabilities::{Capabilities, LeaseTraces, Order};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use codec::{Codec, JsonCodec};
pub use error::{BoxError, Error, Result};
pub use ext::BackendExt;
pub use finished::{Ending, Finished, Keep, Retention};
pub use gauges::export_queue_gauges;
pub use groups::{
    Admin, Control, Events, Groups, History, RunningJob, ScheduleStore, Throttles, WorkerEntry,
    WorkerRegistry,
};
pub use ids::{ItemId, LeaseToken, QueueName};
pub use item::{
    Cancelled, Enqueued, Extended, ItemInfo, ItemState, Lease, LeaseFate, LeaseKey, NewItem,
    Released,
};
pub use layer::LayeredBackend;
pub use limits::{Bounds, ClaimSpec, LeaseTtl};
pub use queue_limits::{LimitScope, QueueLimits, Rate};
pub use redact::{redact_secrets, redact_url};
pub use report::{Claimed, QueueStats, ReapReport, Repair};
pub use typed::TypedQueue;
pub use worker::{
    describe_metrics, handler_fn, metric_names, Handler, HandlerFn, Job, JobContext, JobEvent,
    JobOutcome, JobTimedOut, MetricsSnapshot, Permanent, RetryPolicy, Snooze, Worker,
    WorkerBuilder, WorkerMetrics,
};

pub use async_trait::async_trait;
pub use bytes::Bytes;
pub use tokio_util::sync::CancellationToken;

/// The string constants `module` of `source` declares, in order: the
/// `pub const NAME: &str = "value";` lines up to the module's `ALL`.
#[cfg(test)]
pub(crate) fn declared_consts(source: &str, module: &str) -> Vec<String> {
    let start = source
        .find(&format!("pub mod {module} {{"))
        .unwrap_or_else(|| panic!("no module {module}"));
    source[start..]
        .lines()
        .take_while(|l| !l.contains("pub const ALL"))
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split('"').nth(1))
        .map(str::to_owned)
        .collect()
}
