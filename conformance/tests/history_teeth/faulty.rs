//! A correct backend with one seeded fault in its History group, as a
//! wrapper: the fault is the only difference, so a violation the suite
//! reports is the fault's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use leaseq_core::events::EventStream;
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Backend, BackendExt, Bytes, Ending, Events, Finished, Groups, History, ItemId, ItemState, Keep,
    LayeredBackend, LeaseKey, QueueName, QueueStats, Result, Retention,
};

/// The fault seeded into the wrapped backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// None: the wrapper only passes calls through.
    None,
    /// `complete` is a plain ack: the result is dropped.
    CompleteDropsResult,
    /// `finished` lists the oldest first.
    OldestFirst,
    /// A count bound is stored as "no bound": nothing is ever trimmed.
    CountIgnored,
    /// `collect` removes every kept item, expired or not.
    CollectTakesAll,
    /// `finished_item` never finds anything: waiting for a result ends in
    /// NotFound once the item leaves the queue.
    RecordsUnreadable,
    /// Cancelled items read back as Completed.
    CancelReadAsCompleted,
    /// The policy is cached beside the store: `delete_queue` does not
    /// forget it.
    PolicyCached,
    /// `stats` never counts a completion.
    CompletionsUncounted,
    /// The dead-letter bound is answered as set but never stored: dead
    /// letters stay for ever.
    DeadUnbounded,
    /// `subscribe` gives a stream on which nothing ever comes.
    EventsSilent,
    /// Events name the next job's id.
    EventsOffByOne,
    /// A dead letter reads as kept Completed: deaths recorded as
    /// completions.
    DeathsKeptAsCompleted,
    /// `collect` reads every kept item (up to `MAX_PEEK`) before it
    /// collects: its cost follows what is kept.
    ScanningCollect,
}

/// `inner` with `fault`.
#[derive(Debug)]
pub(crate) struct Faulty {
    inner: Arc<dyn Backend>,
    fault: Fault,
    /// Policies set (PolicyCached).
    policies: Mutex<HashMap<QueueName, Retention>>,
}

impl Faulty {
    pub(crate) fn new(inner: Arc<dyn Backend>, fault: Fault) -> Self {
        Faulty {
            inner,
            fault,
            policies: Mutex::default(),
        }
    }

    fn read(&self, mut f: Finished) -> Finished {
        if self.fault == Fault::CancelReadAsCompleted {
            f.ending = Ending::Completed;
        }
        f
    }
}

#[async_trait]
impl LayeredBackend for Faulty {
    type Inner = Arc<dyn Backend>;

    fn inner(&self) -> &Arc<dyn Backend> {
        &self.inner
    }

    fn groups(&self) -> Groups<'_> {
        self.inner.groups().history(self).events(self)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let mut stats = self.inner.stats(queue).await?;
        if self.fault == Fault::CompletionsUncounted {
            stats.completed = Some(0);
        }
        Ok(stats)
    }
}

#[async_trait]
impl Events for Faulty {
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream> {
        let stream = self.inner.events()?.subscribe(queue).await?;
        Ok(match self.fault {
            Fault::EventsSilent => EventStream::empty(),
            Fault::EventsOffByOne => stream.map_ids(|id| Some(ItemId::new(id.get() + 1))),
            _ => stream,
        })
    }
}

#[async_trait]
impl History for Faulty {
    async fn set_retention(&self, queue: &QueueName, mut retention: Retention) -> Result<()> {
        if self.fault == Fault::CountIgnored {
            for keep in [&mut retention.completed, &mut retention.cancelled] {
                if keep.max_count.is_some_and(|n| n > 0) {
                    keep.max_count = None;
                }
            }
        }
        if self.fault == Fault::DeadUnbounded {
            let mut cached = self.policies.lock().unwrap_or_else(|p| p.into_inner());
            cached.insert(queue.clone(), retention);
            retention.dead = Keep::FOREVER;
        }
        if self.fault == Fault::PolicyCached {
            let mut cached = self.policies.lock().unwrap_or_else(|p| p.into_inner());
            cached.insert(queue.clone(), retention);
        }
        self.inner.history()?.set_retention(queue, retention).await
    }

    async fn retention(&self, queue: &QueueName) -> Result<Retention> {
        let cached = self
            .policies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(queue)
            .copied();
        match cached {
            Some(policy) => Ok(policy),
            None => self.inner.history()?.retention(queue).await,
        }
    }

    async fn complete(&self, lease: &LeaseKey, result: Bytes) -> Result<()> {
        if self.fault == Fault::CompleteDropsResult {
            leaseq_core::finished::check_result(&result)?;
            return self.inner.ack(lease).await;
        }
        self.inner.history()?.complete(lease, result).await
    }

    async fn finished(
        &self,
        queue: &QueueName,
        ending: Option<Ending>,
        limit: usize,
    ) -> Result<Vec<Finished>> {
        let mut list = self.inner.history()?.finished(queue, ending, limit).await?;
        if self.fault == Fault::OldestFirst {
            list.reverse();
        }
        Ok(list.into_iter().map(|f| self.read(f)).collect())
    }

    async fn finished_item(&self, queue: &QueueName, id: ItemId) -> Result<Finished> {
        if self.fault == Fault::RecordsUnreadable {
            return Err(leaseq_core::Error::NotFound { id });
        }
        let found = self.inner.history()?.finished_item(queue, id).await;
        if self.fault == Fault::DeathsKeptAsCompleted {
            if let Err(leaseq_core::Error::NotFound { .. }) = found {
                let info = self.inner.item(queue, id).await?;
                if info.state == ItemState::Dead {
                    return Ok(Finished {
                        id,
                        ending: Ending::Completed,
                        finished_at: self.inner.now().await?,
                        enqueued_at: info.enqueued_at,
                        attempts: info.attempts,
                        payload: info.payload,
                        last_error: info.last_error,
                        result: None,
                    });
                }
            }
        }
        Ok(self.read(found?))
    }

    async fn collect(&self, queue: &QueueName) -> Result<u64> {
        let history = self.inner.history()?;
        if self.fault == Fault::ScanningCollect {
            history.finished(queue, None, MAX_PEEK).await?;
        }
        if self.fault == Fault::CollectTakesAll {
            let policy = history.retention(queue).await?;
            history
                .set_retention(queue, Retention::default().completed(Keep::NOTHING))
                .await?;
            let gone = history.collect(queue).await;
            history.set_retention(queue, policy).await?;
            let kept = history.finished(queue, None, usize::MAX).await?.len() as u64;
            return Ok(gone? + kept);
        }
        history.collect(queue).await
    }

    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal> {
        self.inner.history()?.finished_signal(queue).await
    }
}
