//! [`TestHooks`] for the conformance suite, each one script.

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::testing::{IndexSnapshot, Poison, TestHooks};
use leaseq_core::{Error, ItemId, ItemState, QueueName, Result};

use crate::scripts::arg;
use crate::{RedisBackend, ScriptClient};

#[async_trait]
impl<C: ScriptClient> TestHooks for RedisBackend<C> {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        self.run(&self.scripts.hook_expire, queue, Vec::new())
            .await?
            .uint()
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        self.run(&self.scripts.hook_due, queue, Vec::new())
            .await?
            .uint()
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        self.run(&self.scripts.hook_dangle, queue, vec![arg(id.get())])
            .await?;
        Ok(())
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        let r = self
            .run(&self.scripts.hook_snapshot, queue, Vec::new())
            .await?;
        let f = r.tuple(5)?;
        let ids = |r: &crate::Reply| -> Result<Vec<ItemId>> {
            r.array()?
                .iter()
                .map(|x| x.uint().map(ItemId::new))
                .collect()
        };
        let mut snap = IndexSnapshot::default();
        for (state, part) in ItemState::ALL.into_iter().zip(f) {
            snap.indexes.insert(state, ids(part)?);
        }
        snap.items = ids(&f[4])?;
        Ok(snap)
    }

    /// Every kind can be held: an item is a hash of strings. Attempts at
    /// the limit is `i32::MAX` (no room for a claim's + 1), a priority out
    /// of range is `i32::MAX + 1`, not a number is attempts `"many"`.
    async fn plant_poison(&self, queue: &QueueName, id: ItemId, poison: Poison) -> Result<bool> {
        let kind = match poison {
            Poison::AttemptsAtLimit => "attempts_at_limit",
            Poison::NegativeAttempts => "negative_attempts",
            Poison::BadMaxAttempts => "bad_max_attempts",
            Poison::PriorityOutOfRange => "priority_out_of_range",
            Poison::NotANumber => "not_a_number",
            Poison::MissingPayload => "missing_payload",
            _ => return Ok(false),
        };
        let r = self
            .run(
                &self.scripts.hook_poison,
                queue,
                vec![arg(id.get()), arg(kind)],
            )
            .await?;
        match r.int()? {
            1 => Ok(true),
            _ => Err(Error::NotFound { id }),
        }
    }

    async fn postpone_leases(&self, queue: &QueueName, by: Duration) -> Result<Option<u64>> {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.run(&self.scripts.hook_postpone, queue, vec![arg(by)])
            .await?
            .uint()
            .map(Some)
    }

    fn steps(&self, queue: &QueueName) -> Option<u64> {
        self.steps.get(queue)
    }
}
