//! The test hooks the conformance suite plants stale and corrupt states
//! with, on when the backend is built `with_test_hooks`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};

use leaseq_core::testing::{IndexSnapshot, TestHooks};
use leaseq_core::{async_trait, ItemId, ItemState, QueueName, Result, Timestamp};

use crate::queue::Item;
use crate::{Bug, NaiveBackend};

#[async_trait]
impl TestHooks for NaiveBackend {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        let mut st = self.lock();
        let now = self.clock_now();
        let Some(q) = st.queues.get_mut(queue) else {
            return Ok(0);
        };
        let every = self.bug() == Bug::ExpireHookTouchesExpired;
        let touched: Vec<(Timestamp, u64)> = q
            .leased
            .keys()
            .filter(|(at, _)| every || *at > now)
            .copied()
            .collect();
        Ok(restamp(&mut q.leased, &mut q.items, &touched, now))
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let mut st = self.lock();
        let now = self.clock_now();
        let Some(q) = st.queues.get_mut(queue) else {
            return Ok(0);
        };
        let due: Vec<(Timestamp, u64)> = q.scheduled.keys().copied().collect();
        Ok(restamp(&mut q.scheduled, &mut q.items, &due, now))
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        let mut st = self.lock();
        let q = st.queues.entry(queue.clone()).or_default();
        q.ready.insert((Reverse(i32::MAX), id.get()), id.get());
        Ok(())
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        let st = self.lock();
        let mut snap = IndexSnapshot::default();
        if let Some(q) = st.queues.get(queue) {
            for state in ItemState::ALL {
                let ids = q.index(state).into_iter().map(ItemId::new).collect();
                snap.indexes.insert(state, ids);
            }
            snap.items = q.items.keys().copied().map(ItemId::new).collect();
        }
        Ok(snap)
    }

    fn steps(&self, queue: &QueueName) -> Option<u64> {
        self.steps.get(queue)
    }
}

/// Moves the `entries` of a time-ordered `index` (and their items' due
/// times) to `now`; returns how many.
fn restamp(
    index: &mut BTreeMap<(Timestamp, u64), ()>,
    items: &mut HashMap<u64, Item>,
    entries: &[(Timestamp, u64)],
    now: Timestamp,
) -> u64 {
    for (at, id) in entries {
        index.remove(&(*at, *id));
        index.insert((now, *id), ());
        if let Some(i) = items.get_mut(id) {
            i.due = Some(now);
        }
    }
    entries.len() as u64
}
