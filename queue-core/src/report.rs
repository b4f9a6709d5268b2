//! What operations report back: claims with their repairs, reap results,
//! per-state counts.

use std::fmt;
use std::time::Duration;

use crate::{ItemId, ItemState, Lease};

/// One piece of corrupt state that self-healing removed (INV-6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// The index the bad entry was in.
    pub index: ItemState,
    /// The id the entry named.
    pub id: ItemId,
    /// What was wrong: a missing item, a value of the wrong type, a
    /// duplicate entry, an item whose state disagrees with the index.
    pub problem: String,
}

impl Repair {
    /// What [`Repair::past_horizon`] says was wrong.
    pub const PAST_HORIZON: &'static str =
        "lease expiry is past the lease horizon (a clock that ran ahead?): expired now";

    /// The repair of a lease whose expiry lay past
    /// [`crate::limits::LEASE_HORIZON`], which the reap expired: the same
    /// words on every backend.
    pub fn past_horizon(id: ItemId) -> Self {
        Repair {
            index: ItemState::Leased,
            id,
            problem: Self::PAST_HORIZON.to_owned(),
        }
    }
}

impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} index entry {}: {}",
            self.index, self.id, self.problem
        )
    }
}

/// The result of a claim: the leases, plus any repairs made on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use = "leases that are dropped dangle until they expire and spend an attempt"]
pub struct Claimed {
    /// The items claimed, in claim order (highest priority, then oldest).
    pub leases: Vec<Lease>,
    /// Corrupt entries removed while claiming. Each was also logged.
    pub repairs: Vec<Repair>,
    /// Set when the queue's limits ([`crate::QueueLimits`]) cut the claim
    /// short: how long to wait before claiming again. Until the rate
    /// window ends for a rate limit, a short hint
    /// ([`crate::queue_limits::CONCURRENCY_RETRY`]) for a concurrency
    /// limit. `None` when no limit held the claim back.
    pub retry_after: Option<Duration>,
    /// The queue is paused ([`crate::Control::pause`]): nothing was leased.
    pub paused: bool,
}

/// The result of a reap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Expired leases sent back to Ready.
    pub requeued: u64,
    /// Expired leases whose attempts were exhausted, sent to Dead.
    pub dead: u64,
    /// Expired leases of items with a cancel request
    /// ([`crate::Control::cancel`]), which ended Cancelled.
    pub cancelled: u64,
    /// Corrupt entries removed while reaping.
    pub repairs: Vec<Repair>,
}

impl ReapReport {
    /// Leases recovered in total.
    pub fn recovered(&self) -> u64 {
        self.requeued + self.dead + self.cancelled
    }
}

/// Items per state in one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Claimable now (Scheduled items that are already due count here).
    pub ready: u64,
    /// Waiting for their delay.
    pub scheduled: u64,
    /// Held by a worker (including expired leases not yet reaped).
    pub leased: u64,
    /// Given up on.
    pub dead: u64,
    /// The queue is paused ([`crate::Control::pause`]); always false on a
    /// backend without the Control group.
    pub paused: bool,
    /// Items completed (acked, or completed with a result) since the queue
    /// was made or last deleted: a counter that only grows, for rates.
    /// `None` on a backend that does not count (one without the
    /// [`crate::History`] group). Not part of [`QueueStats::total`].
    pub completed: Option<u64>,
}

impl QueueStats {
    /// All items still in the queue.
    pub fn total(&self) -> u64 {
        self.ready + self.scheduled + self.leased + self.dead
    }

    /// The count for one state.
    pub fn get(&self, state: ItemState) -> u64 {
        match state {
            ItemState::Ready => self.ready,
            ItemState::Scheduled => self.scheduled,
            ItemState::Leased => self.leased,
            ItemState::Dead => self.dead,
        }
    }
}
