//! The inner backend's test hooks, seen through the sharded queue: a hook
//! on a logical queue runs on each of its shards, and ids are translated
//! both ways.

use std::time::Duration;

use async_trait::async_trait;

use super::{sharded_id, split_id, Sharded};
use crate::testing::{IndexSnapshot, Poison, TestHooks};
use crate::{Backend, BackendExt, Error, ItemId, QueueName, Result};

impl<B: Backend> Sharded<B> {
    fn inner_hooks(&self) -> Result<&dyn TestHooks> {
        self.inner
            .test_hooks()
            .ok_or_else(|| Error::invalid("the inner backend has no test hooks"))
    }
}

#[async_trait]
impl<B: Backend> TestHooks for Sharded<B> {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        let mut n = 0;
        for i in 0..self.shards {
            n += self
                .inner_hooks()?
                .expire_leases(&self.shard(queue, i)?)
                .await?;
        }
        Ok(n)
    }

    async fn make_due(&self, queue: &QueueName) -> Result<u64> {
        let mut n = 0;
        for i in 0..self.shards {
            n += self.inner_hooks()?.make_due(&self.shard(queue, i)?).await?;
        }
        Ok(n)
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        let (shard, inner) = split_id(self.shards, id);
        self.inner_hooks()?
            .plant_dangling_ready(&self.shard(queue, shard)?, inner)
            .await
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        let mut out = IndexSnapshot::default();
        for i in 0..self.shards {
            let s = self.inner_hooks()?.snapshot(&self.shard(queue, i)?).await?;
            for (state, ids) in s.indexes {
                let entry = out.indexes.entry(state).or_default();
                for id in ids {
                    entry.push(sharded_id(self.shards, i, id)?);
                }
            }
            for id in s.items {
                out.items.push(sharded_id(self.shards, i, id)?);
            }
        }
        Ok(out)
    }

    async fn plant_poison(&self, queue: &QueueName, id: ItemId, poison: Poison) -> Result<bool> {
        let (shard, inner) = split_id(self.shards, id);
        self.inner_hooks()?
            .plant_poison(&self.shard(queue, shard)?, inner, poison)
            .await
    }

    async fn postpone_leases(&self, queue: &QueueName, by: Duration) -> Result<Option<u64>> {
        let mut n = 0;
        for i in 0..self.shards {
            let shard = self.shard(queue, i)?;
            match self.inner_hooks()?.postpone_leases(&shard, by).await? {
                Some(moved) => n += moved,
                None => return Ok(None),
            }
        }
        Ok(Some(n))
    }

    fn steps(&self, queue: &QueueName) -> Option<u64> {
        let hooks = self.inner.test_hooks()?;
        let mut total = 0;
        for i in 0..self.shards {
            total += hooks.steps(&self.shard(queue, i).ok()?)?;
        }
        Some(total)
    }
}
