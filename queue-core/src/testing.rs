//! For test suites, not for production code: the optional hooks a backend
//! exposes so the conformance suite can force states that are otherwise
//! hard to reach (stale leases, corrupt indexes, poison), the snapshot of
//! its indexes the suite checks, and the counter of its atomic steps.
//! Backend authors implement [`TestHooks`] behind an option that is off by
//! default; applications never need this module.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;

use crate::{ItemId, ItemState, QueueName, Result};

/// The raw contents of a queue's state indexes, duplicates included, in index
/// order. Used to check INV-1 (single home).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexSnapshot {
    /// For each state, the ids its index holds.
    pub indexes: BTreeMap<ItemState, Vec<ItemId>>,
    /// Ids that have item data (payload record, row).
    pub items: Vec<ItemId>,
}

impl IndexSnapshot {
    /// Every violation of INV-1 in this snapshot, in words: an id held twice
    /// by one index, an id in two indexes, an index entry with no item, an
    /// item in no index.
    pub fn violations(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut home: BTreeMap<ItemId, ItemState> = BTreeMap::new();
        for (state, ids) in &self.indexes {
            let mut seen = std::collections::BTreeSet::new();
            for id in ids {
                if !seen.insert(*id) {
                    out.push(format!("{state} index holds {id} more than once"));
                }
                if let Some(other) = home.insert(*id, *state) {
                    if other != *state {
                        out.push(format!("{id} is in both the {other} and {state} indexes"));
                    }
                }
            }
        }
        let items: std::collections::BTreeSet<ItemId> = self.items.iter().copied().collect();
        for (id, state) in &home {
            if !items.contains(id) {
                out.push(format!("{state} index entry {id} has no item"));
            }
        }
        for id in &items {
            if !home.contains_key(id) {
                out.push(format!("item {id} is in no index"));
            }
        }
        out
    }
}

/// Test-only access to a backend's internals. Never used by the runtime.
#[async_trait]
pub trait TestHooks: Send + Sync {
    /// Makes every live lease of the queue expired at the backend's now
    /// (without reaping it); returns how many it touched. A lease that has
    /// already expired is left as it is, its expiry unchanged.
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64>;

    /// Makes every Scheduled item of the queue due now; returns how many.
    async fn make_due(&self, queue: &QueueName) -> Result<u64>;

    /// Puts an entry for `id`, which has no item, at the head of the Ready
    /// index: the dangling id a broken reaper leaves behind.
    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()>;

    /// The raw contents of the queue's indexes.
    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot>;

    /// Poisons item `id` of the queue with `poison`: a value the store can
    /// hold but the backend cannot use. Returns `false` when this store
    /// cannot hold that poison at all (a typed column, a schema check), so
    /// the suite skips that kind. The default plants nothing.
    async fn plant_poison(&self, queue: &QueueName, id: ItemId, poison: Poison) -> Result<bool> {
        let _ = (queue, id, poison);
        Ok(false)
    }

    /// Moves the expiry of every live lease of the queue `by` later, the
    /// tokens unchanged: what a server clock that ran `by` ahead while the
    /// leases were taken leaves behind once it is set right. Returns how
    /// many leases it moved, or `None` when the backend cannot (the
    /// default), and the suite skips the check that needs it.
    async fn postpone_leases(&self, queue: &QueueName, by: Duration) -> Result<Option<u64>> {
        let _ = (queue, by);
        Ok(None)
    }

    /// How many atomic steps (server round trips, SQL statements, critical
    /// sections) the backend has spent on `queue` so far, or `None` when it
    /// does not count them. The suite compares counts before and after one
    /// call to prove that a batch is one step, not a loop over its items.
    /// [`StepCounter`] does the bookkeeping.
    fn steps(&self, queue: &QueueName) -> Option<u64> {
        let _ = queue;
        None
    }
}

/// A value a store can hold that the backend cannot use: what
/// [`TestHooks::plant_poison`] writes into an item, and what a claim must
/// move aside (to Dead with a reason, reported as a [`crate::Repair`])
/// without leasing it or stalling healthy items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Poison {
    /// The attempt counter at the largest value the store holds, so a claim
    /// cannot add one.
    AttemptsAtLimit,
    /// A negative attempt counter.
    NegativeAttempts,
    /// A negative or zero max attempts.
    BadMaxAttempts,
    /// A priority outside `i32`.
    PriorityOutOfRange,
    /// A numeric field holding text.
    NotANumber,
    /// An item record whose payload is missing.
    MissingPayload,
}

impl Poison {
    /// Every kind.
    pub const ALL: [Poison; 6] = [
        Poison::AttemptsAtLimit,
        Poison::NegativeAttempts,
        Poison::BadMaxAttempts,
        Poison::PriorityOutOfRange,
        Poison::NotANumber,
        Poison::MissingPayload,
    ];
}

/// Per-queue step counts for [`TestHooks::steps`]: a backend calls
/// [`StepCounter::count`] wherever it makes one atomic step. A counter made
/// with `enabled == false` (a production handle) counts nothing.
#[derive(Debug, Default)]
pub struct StepCounter {
    enabled: bool,
    counts: Mutex<HashMap<String, u64>>,
}

impl StepCounter {
    /// A counter that counts only when `enabled`.
    pub fn new(enabled: bool) -> Self {
        StepCounter {
            enabled,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this counter counts.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// One step on `queue`.
    pub fn count(&self, queue: &QueueName) {
        if self.enabled {
            let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            *counts.entry(queue.as_str().to_owned()).or_default() += 1;
        }
    }

    /// The steps counted on `queue`; `None` when counting is off.
    pub fn get(&self, queue: &QueueName) -> Option<u64> {
        self.enabled.then(|| {
            let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
            counts.get(queue.as_str()).copied().unwrap_or(0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_every_kind_of_violation() {
        let id = ItemId::new;
        let mut s = IndexSnapshot::default();
        s.indexes
            .insert(ItemState::Ready, vec![id(1), id(1), id(2)]);
        s.indexes.insert(ItemState::Leased, vec![id(2), id(3)]);
        s.items = vec![id(1), id(2), id(4)];
        let v = s.violations();
        assert!(v.iter().any(|m| m.contains("more than once")), "{v:?}");
        assert!(v.iter().any(|m| m.contains("in both")), "{v:?}");
        assert!(v.iter().any(|m| m.contains("3 has no item")), "{v:?}");
        assert!(
            v.iter().any(|m| m.contains("item 4 is in no index")),
            "{v:?}"
        );

        let mut ok = IndexSnapshot::default();
        ok.indexes.insert(ItemState::Ready, vec![id(1)]);
        ok.items = vec![id(1)];
        assert!(ok.violations().is_empty());
    }
}
