//! Baselines: the same work done on the same store with no queue semantics
//! (no leases, no tokens, no fencing, no indexes beyond the store's own),
//! so each backend's figure can be given as a fraction of what its store
//! does bare.

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::Result;

mod memory;
pub use memory::VecDequeBaseline;

#[cfg(feature = "fred")]
mod fred;
#[cfg(feature = "fred")]
pub use self::fred::FredRaw;

#[cfg(feature = "redis-rs")]
mod redis_rs;
#[cfg(feature = "redis-rs")]
pub use redis_rs::RedisRsRaw;

#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
pub use postgres::{AckStyle, PgRaw};

#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRaw;

/// A bare store doing a queue's work with none of its guarantees.
#[async_trait]
pub trait Baseline: Send + Sync + fmt::Debug {
    /// The bench id, e.g. `redis-rs-raw`.
    fn name(&self) -> &str;

    /// What it does, in one line for the results table.
    fn describe(&self) -> &str;

    /// True when it only makes sense for the batched workloads.
    fn batch_only(&self) -> bool {
        false
    }

    /// Stores `payloads` at the tail of `queue`.
    async fn push(&self, queue: &str, payloads: &[Bytes]) -> Result<()>;

    /// Takes up to `n` payloads from the head of `queue` and finishes them
    /// (whatever "done" means bare: popped, or deleted); returns how many.
    async fn pop(&self, queue: &str, n: usize) -> Result<usize>;

    /// Removes everything in `queue`.
    async fn clear(&self, queue: &str) -> Result<()>;
}
