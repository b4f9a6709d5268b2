//! [`History`] over shards: each shard keeps its own finished items under
//! the logical queue's policy, and reads merge them, newest first, with
//! ids translated.
//!
//! A count bound holds per shard (each shard keeps up to `max_count`), so
//! the listing, which cuts the merge to `max_count`, shows exactly the
//! newest `max_count` across shards; `finished_item` may still find an item
//! a single store would already have trimmed, until its shard trims it.

use async_trait::async_trait;
use bytes::Bytes;

use super::Sharded;
use crate::signal::Signal;
use crate::{
    Backend, BackendExt, Ending, Error, Finished, History, ItemId, LeaseKey, QueueName, Result,
    Retention,
};

#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> History for Sharded<B> {
    /// Sets the policy on every shard.
    async fn set_retention(&self, queue: &QueueName, retention: Retention) -> Result<()> {
        retention.check()?;
        self.on_shards(queue, &self.all(), move |_, b, q| async move {
            b.history()?.set_retention(&q, retention).await
        })
        .await?;
        Ok(())
    }

    /// The first shard's policy: every shard gets the same one.
    async fn retention(&self, queue: &QueueName) -> Result<Retention> {
        let first = self.shard(queue, 0)?;
        self.inner.history()?.retention(&first).await
    }

    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()> {
        crate::finished::check_result(&result)?;
        self.on_lease(lease, |l| async move {
            self.inner.history()?.complete(&l, result).await
        })
        .await
    }

    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<Ending>,
        limit: usize,
    ) -> Result<Vec<Finished>> {
        let limit = limit.min(crate::limits::MAX_PEEK);
        let retention = self.retention(queue).await?;
        let per_shard = self
            .on_shards(queue, &self.all(), move |_, b, q| async move {
                b.history()?.finished(&q, ending, limit).await
            })
            .await?;
        let mut all = Vec::new();
        for (shard, list) in per_shard {
            for f in list {
                all.push(self.logical_finished(shard, f)?);
            }
        }
        all.sort_by_key(|f| std::cmp::Reverse((f.finished_at, f.id)));
        // Each shard keeps up to the count; the logical queue shows the
        // newest that many of each ending.
        let mut shown = [0u64; 2];
        all.retain(|f| {
            let n = &mut shown[usize::from(f.ending == Ending::Cancelled)];
            *n += 1;
            retention.of(f.ending).max_count.is_none_or(|max| *n <= max)
        });
        all.truncate(limit);
        Ok(all)
    }

    async fn finished_item(&self, queue: &QueueName, id: ItemId) -> Result<Finished> {
        let Some((shard, physical, inner)) = self.locate(queue, id)? else {
            return Err(Error::NotFound { id });
        };
        match self.inner.history()?.finished_item(&physical, inner).await {
            Ok(f) => self.logical_finished(shard, f),
            Err(Error::NotFound { .. }) => Err(Error::NotFound { id }),
            Err(e) => Err(e),
        }
    }

    /// Collects every shard.
    async fn collect(&self, queue: &QueueName) -> Result<u64> {
        let all = self
            .on_shards(queue, &self.all(), |_, b, q| async move {
                b.history()?.collect(&q).await
            })
            .await?;
        Ok(all.into_iter().map(|(_, n)| n).sum())
    }

    /// One signal over every shard's.
    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal> {
        let history = self.inner.history()?;
        let mut signals = Vec::new();
        for shard in self.all() {
            signals.push(history.finished_signal(&self.shard(queue, shard)?).await?);
        }
        Ok(Signal::merge(signals))
    }
}

/// Every shard's events, with logical ids; order holds per shard.
#[deny(clippy::missing_trait_methods)]
#[async_trait]
impl<B: Backend> crate::Events for Sharded<B> {
    async fn subscribe(&self, queue: &QueueName) -> Result<crate::events::EventStream> {
        let events = self.inner.events()?;
        let mut streams = Vec::new();
        for shard in self.all() {
            let shards = self.shards;
            let stream = events.subscribe(&self.shard(queue, shard)?).await?;
            streams.push(stream.map_ids(move |id| super::sharded_id(shards, shard, id).ok()));
        }
        Ok(crate::events::EventStream::merge(streams))
    }
}

impl<B: Backend> Sharded<B> {
    /// A shard's record, with the logical id.
    fn logical_finished(&self, shard: u16, f: Finished) -> Result<Finished> {
        Ok(Finished {
            id: super::sharded_id(self.shards, shard, f.id)?,
            ..f
        })
    }
}
