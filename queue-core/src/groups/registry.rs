//! Live workers: each [`crate::Worker`] registers itself with a heartbeat,
//! so an operator can see who runs what.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{Error, ItemId, QueueName, Result, Timestamp};

/// The live workers of a store. An optional group: a backend offers it
/// through [`Backend::groups`](crate::Backend::groups), and every method is
/// required.
///
/// Entries are not queue-scoped: one registry per store.
#[async_trait]
pub trait WorkerRegistry: Send + Sync {
    /// Writes `entry` (replacing the one with its id), to expire `ttl` after
    /// the backend's now unless written again; answers that expiry.
    ///
    /// # Contract
    /// - Listed by [`WorkerRegistry::workers`] from when this returns until
    ///   the expiry or [`WorkerRegistry::deregister`].
    /// - Expired entries are deleted on the way, by this call or by
    ///   `workers`: the cost of both grows with the number of workers
    ///   registered, not with the number of jobs or items.
    /// - An entry over [`crate::limits::MAX_WORKER_ENTRY_LEN`] bytes when
    ///   encoded ([`WorkerEntry::encode`]), or a `ttl` of zero or over
    ///   [`crate::limits::MAX_LEASE_TTL`], is
    ///   [`crate::Error::InvalidInput`] and nothing is written.
    async fn register(&self, entry: &WorkerEntry, ttl: Duration) -> Result<Timestamp>;

    /// Removes the entry `id` (a worker that stops); answers whether it was
    /// there.
    async fn deregister(&self, id: &str) -> Result<bool>;

    /// The entries that have not expired on the backend's clock, sorted by
    /// id.
    async fn workers(&self) -> Result<Vec<WorkerEntry>>;
}

/// One live worker, as it registers itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WorkerEntry {
    /// A unique id for this worker's life (a new one per start).
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The queue it consumes.
    pub queue: String,
    /// How many jobs it runs at once.
    pub concurrency: usize,
    /// When it started, on the backend's clock, in milliseconds.
    pub started_at: u64,
    /// The jobs it is running now (at most [`WorkerEntry::MAX_JOBS`]).
    pub jobs: Vec<RunningJob>,
    /// When the entry expires unless renewed, in milliseconds on the
    /// backend's clock: set by the backend, ignored when registering.
    #[serde(default)]
    pub expires_at: u64,
}

/// One job a worker is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningJob {
    /// The item.
    pub id: ItemId,
    /// Its attempt (1 on the first delivery).
    pub attempt: u32,
    /// When the handler started, in milliseconds on the backend's clock.
    pub started_at: u64,
}

impl WorkerEntry {
    /// Jobs an entry lists; a worker running more lists the oldest.
    pub const MAX_JOBS: usize = 1_000;

    /// An entry for a worker of `queue` on this host and process, with no
    /// jobs yet.
    pub fn new(
        id: impl Into<String>,
        queue: &QueueName,
        concurrency: usize,
        started_at: Timestamp,
    ) -> Self {
        WorkerEntry {
            id: id.into(),
            host: hostname(),
            pid: std::process::id(),
            queue: queue.as_str().to_owned(),
            concurrency,
            started_at: started_at.as_millis(),
            jobs: Vec::new(),
            expires_at: 0,
        }
    }

    /// The stored form: JSON. Checked against
    /// [`crate::limits::MAX_WORKER_ENTRY_LEN`].
    pub fn encode(&self) -> Result<String> {
        if self.id.is_empty() || self.id.len() > 128 {
            return Err(Error::invalid("a worker id is 1 to 128 bytes"));
        }
        let text = serde_json::to_string(self)
            .map_err(|e| Error::invalid(format!("worker entry does not encode: {e}")))?;
        if text.len() > crate::limits::MAX_WORKER_ENTRY_LEN {
            return Err(Error::invalid(format!(
                "worker entry is {} bytes encoded; the limit is {}",
                text.len(),
                crate::limits::MAX_WORKER_ENTRY_LEN
            )));
        }
        Ok(text)
    }

    /// Checks a registration's time-to-live: over zero, at most
    /// [`crate::limits::MAX_LEASE_TTL`].
    pub fn check_ttl(ttl: Duration) -> Result<()> {
        if ttl.is_zero() || ttl > crate::limits::MAX_LEASE_TTL {
            return Err(Error::invalid(format!(
                "a worker entry's ttl must be over zero and at most {:?}",
                crate::limits::MAX_LEASE_TTL
            )));
        }
        Ok(())
    }

    /// Reads the stored form back, with the expiry the backend keeps.
    pub fn decode(text: &str, expires_at: Timestamp) -> Result<Self> {
        let mut entry: WorkerEntry = serde_json::from_str(text).map_err(|e| Error::Corrupt {
            what: format!("stored worker entry does not decode: {e}"),
        })?;
        entry.expires_at = expires_at.as_millis();
        Ok(entry)
    }

    /// One entry of a `workers` listing, as a backend reads it: the
    /// entry, or `None`, with a warning naming worker `id`, when the stored
    /// bytes do not decode. One bad entry must not hide the others; it
    /// expires like any other.
    pub fn decode_listed(id: &str, stored: &[u8], expires_at: Timestamp) -> Option<Self> {
        let decoded = std::str::from_utf8(stored)
            .map_err(|e| Error::Corrupt {
                what: format!("stored worker entry is not UTF-8: {e}"),
            })
            .and_then(|text| Self::decode(text, expires_at));
        match decoded {
            Ok(entry) => Some(entry),
            Err(e) => {
                tracing::warn!(worker = %id, error = %e, "a stored worker entry does not decode; left out of the listing");
                None
            }
        }
    }
}

/// This machine's name, or `"unknown"`.
fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
