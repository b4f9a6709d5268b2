//! [`TestHooks`]: let the conformance suite reach stale and corrupt states.

use std::cmp::Reverse;
use std::time::Duration;

use leaseq_core::testing::{IndexSnapshot, TestHooks};
use leaseq_core::{async_trait, ItemId, ItemState, QueueName, Result};

use crate::backend::MemoryBackend;
use crate::state::Slot;

#[async_trait]
impl TestHooks for MemoryBackend {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        Ok(self.move_live_leases(queue, |_, now| now))
    }

    async fn postpone_leases(&self, queue: &QueueName, by: Duration) -> Result<Option<u64>> {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        Ok(Some(self.move_live_leases(queue, |expires, _| {
            expires.saturating_add(by)
        })))
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let moved = self.existing(queue, |q| {
            let mut st = q.lock();
            let entries: Vec<(u64, u64, u64)> =
                std::mem::take(&mut st.scheduled).into_iter().collect();
            let mut moved = 0;
            for (due, seq, id) in entries {
                match st.items.get_mut(&id) {
                    Some(item) if item.slot == (Slot::Scheduled { due }) && item.seq == seq => {
                        item.slot = Slot::Ready;
                        let key = item.ready_key(id);
                        st.ready.insert(key);
                        moved += 1;
                    }
                    // Keep what is not ours to fix; claims repair it.
                    _ => {
                        st.scheduled.insert((due, seq, id));
                    }
                }
            }
            drop(st);
            if moved > 0 {
                q.wake();
            }
            moved
        });
        Ok(moved.unwrap_or(0))
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        self.ensure(queue, |q| {
            q.lock().ready.insert((Reverse(i32::MAX), 0, id.get()));
        });
        Ok(())
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        let mut snap = IndexSnapshot::default();
        for state in ItemState::ALL {
            snap.indexes.insert(state, Vec::new());
        }
        self.existing(queue, |q| {
            let st = q.lock();
            let ids = |v: Vec<u64>| v.into_iter().map(ItemId::new).collect::<Vec<_>>();
            snap.indexes.insert(
                ItemState::Ready,
                ids(st.ready.iter().map(|e| e.2).collect()),
            );
            snap.indexes.insert(
                ItemState::Scheduled,
                ids(st.scheduled.iter().map(|e| e.2).collect()),
            );
            snap.indexes.insert(
                ItemState::Leased,
                ids(st.leased.iter().map(|e| e.1).collect()),
            );
            snap.indexes
                .insert(ItemState::Dead, ids(st.dead.iter().map(|e| e.1).collect()));
            let mut items: Vec<u64> = st.items.keys().copied().collect();
            items.sort_unstable();
            snap.items = ids(items);
        });
        Ok(snap)
    }

    fn steps(&self, queue: &QueueName) -> Option<u64> {
        self.steps.get(queue)
    }
}

impl MemoryBackend {
    /// Gives every live lease of the queue (live at the clock's `now`) the
    /// expiry `to(expiry, now)`; returns how many.
    fn move_live_leases(&self, queue: &QueueName, to: impl Fn(u64, u64) -> u64) -> u64 {
        let now = self.now_ms();
        let moved = self.existing(queue, |q| {
            let mut st = q.lock();
            let live: Vec<(u64, u64)> = st
                .leased
                .range((now.saturating_add(1), 0)..)
                .copied()
                .collect();
            for &(expires, id) in &live {
                st.set_expiry(id, expires, to(expires, now));
            }
            live.len() as u64
        });
        moved.unwrap_or(0)
    }
}
