//! A correct backend with one seeded fault in its History or Events group
//! (or where they meet the core and the Admin group), as a wrapper: the
//! fault is the only difference, so a violation the suite reports is the
//! fault's. The Events and Admin impls are in their own files.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::events::{EventHub, EventKind, JobEvent};
use leaseq_core::finished::MAX_RESULT_LEN;
use leaseq_core::limits::MAX_PEEK;
use leaseq_core::signal::Signal;
use leaseq_core::{
    Backend, BackendExt, Bytes, Ending, Enqueued, Error, Finished, Groups, History, ItemId,
    ItemState, Keep, LayeredBackend, LeaseKey, NewItem, QueueName, QueueStats, Released, Result,
    Retention,
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
    /// `purge` removes the queue's items one by one and leaves its kept
    /// items.
    PurgeKeepsHistory,
    /// `queues` lists a queue whose policy was set while it holds kept
    /// items, also when it holds nothing else.
    HistoryOnlyQueueListed,
    /// A kept item still holds its dedup key: an enqueue of the key
    /// answers the kept item, deduplicated.
    KeptHoldsKey,
    /// `complete` cuts a result over `MAX_RESULT_LEN` to the bound and
    /// completes.
    ResultUnbounded,
    /// `complete` with a stale token answers `Ok` (and changes nothing).
    StaleCompleteAccepted,
    /// The completion counter also counts releases and fails.
    CountsReleases,
    /// A purge sets the completion counter back to 0.
    PurgeResetsCount,
    /// A redriven item stays under the dead-letter bound: a collect under
    /// any dead bound removes it.
    RedrivenStillDead,
    /// No Released event reaches a subscriber.
    EventsDropReleased,
    /// Every event reaches a subscriber twice.
    EventsDuplicated,
    /// An enqueue that deduplicated reports Enqueued for the holder.
    EventsForDedup,
    /// A redrive reports Enqueued, a removal Cancelled.
    EventsForAdmin,
    /// A subscriber's stream holds many times `EVENT_BUFFER` events and
    /// never lags.
    EventsUnbounded,
}

/// `inner` with `fault`.
#[derive(Debug)]
pub(crate) struct Faulty {
    pub(super) inner: Arc<dyn Backend>,
    pub(super) fault: Fault,
    /// Policies set (PolicyCached, DeadUnbounded).
    policies: Mutex<HashMap<QueueName, Retention>>,
    /// Events the wrapper makes up (EventsForDedup, EventsForAdmin).
    pub(super) hub: EventHub,
    /// Dedup keys enqueued, with the item that took each (KeptHoldsKey).
    keys: Mutex<HashMap<(QueueName, String), ItemId>>,
    /// Releases and fails per queue (CountsReleases).
    not_completions: Mutex<HashMap<QueueName, u64>>,
    /// The completion count at the last purge, per queue
    /// (PurgeResetsCount).
    pub(super) count_at_purge: Mutex<HashMap<QueueName, u64>>,
    /// Items redriven, per queue (RedrivenStillDead).
    pub(super) redriven: Mutex<HashMap<QueueName, Vec<ItemId>>>,
    /// Queues whose policy was set (HistoryOnlyQueueListed).
    retained: Mutex<BTreeSet<QueueName>>,
}

/// The guarded value, also after a panic elsewhere.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Faulty {
    pub(crate) fn new(inner: Arc<dyn Backend>, fault: Fault) -> Self {
        Faulty {
            inner,
            fault,
            policies: Mutex::default(),
            hub: EventHub::default(),
            keys: Mutex::default(),
            not_completions: Mutex::default(),
            count_at_purge: Mutex::default(),
            redriven: Mutex::default(),
            retained: Mutex::default(),
        }
    }

    /// Forgets what the wrapper holds of `queue` (a delete), but for the
    /// cached policies: keeping them is the PolicyCached fault.
    pub(super) fn forget(&self, queue: &QueueName) {
        lock(&self.keys).retain(|(q, _), _| q != queue);
        lock(&self.not_completions).remove(queue);
        lock(&self.count_at_purge).remove(queue);
        lock(&self.redriven).remove(queue);
        lock(&self.retained).remove(queue);
    }

    /// Enqueues one item; a key whose item is kept answers that item
    /// (KeptHoldsKey).
    async fn enqueue_holding(&self, queue: &QueueName, item: NewItem) -> Result<Enqueued> {
        let key = item.dedup_key.clone().map(|k| (queue.clone(), k));
        let holder = key.as_ref().and_then(|k| lock(&self.keys).get(k).copied());
        if let Some(id) = holder {
            if self.inner.history()?.finished_item(queue, id).await.is_ok() {
                return Ok(Enqueued {
                    id,
                    deduplicated: true,
                });
            }
        }
        let out = self.inner.enqueue(queue, vec![item]).await?;
        let first = *out.first().ok_or_else(|| Error::Corrupt {
            what: "an enqueue of one item answered nothing".into(),
        })?;
        if let (Some(key), false) = (key, first.deduplicated) {
            lock(&self.keys).insert(key, first.id);
        }
        Ok(first)
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
        self.inner.groups().history(self).events(self).admin(self)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        let mut stats = self.inner.stats(queue).await?;
        match self.fault {
            Fault::CompletionsUncounted => stats.completed = Some(0),
            Fault::CountsReleases => {
                let extra = lock(&self.not_completions).get(queue).copied();
                stats.completed = stats.completed.map(|n| n + extra.unwrap_or(0));
            }
            Fault::PurgeResetsCount => {
                let at = lock(&self.count_at_purge).get(queue).copied();
                stats.completed = stats.completed.map(|n| n.saturating_sub(at.unwrap_or(0)));
            }
            _ => {}
        }
        Ok(stats)
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let mut listed = self.inner.queues().await?;
        if self.fault == Fault::HistoryOnlyQueueListed {
            let retained: Vec<QueueName> = lock(&self.retained).iter().cloned().collect();
            for queue in retained {
                let kept = self.inner.history()?.finished(&queue, None, 1).await?;
                if !kept.is_empty() && !listed.contains(&queue) {
                    listed.push(queue);
                }
            }
        }
        Ok(listed)
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        let out = match self.fault {
            Fault::KeptHoldsKey => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.enqueue_holding(queue, item).await?);
                }
                out
            }
            _ => self.inner.enqueue(queue, items).await?,
        };
        if self.fault == Fault::EventsForDedup {
            for e in out.iter().filter(|e| e.deduplicated) {
                self.hub
                    .publish(queue.as_str(), || JobEvent::new(e.id, EventKind::Enqueued));
            }
        }
        Ok(out)
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        let out = self.inner.release(lease, delay).await?;
        self.count_not_completion(&lease.queue);
        Ok(out)
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.inner.fail(lease, reason).await?;
        self.count_not_completion(&lease.queue);
        Ok(())
    }
}

impl Faulty {
    /// Counts a release or a fail (CountsReleases).
    fn count_not_completion(&self, queue: &QueueName) {
        if self.fault == Fault::CountsReleases {
            *lock(&self.not_completions)
                .entry(queue.clone())
                .or_default() += 1;
        }
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
        lock(&self.retained).insert(queue.clone());
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
        let history = self.inner.history()?;
        match self.fault {
            Fault::ResultUnbounded => {
                history
                    .complete(lease, result.slice(..result.len().min(MAX_RESULT_LEN)))
                    .await
            }
            Fault::StaleCompleteAccepted => match history.complete(lease, result).await {
                Err(e) if e.is_lease_lost() => Ok(()),
                other => other,
            },
            _ => history.complete(lease, result).await,
        }
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
        let gone = history.collect(queue).await?;
        if self.fault == Fault::RedrivenStillDead && history.retention(queue).await?.bounds_dead() {
            let redriven = lock(&self.redriven).remove(queue).unwrap_or_default();
            let mut also = 0;
            for id in redriven {
                if self.inner.admin()?.remove_item(queue, id).await.is_ok() {
                    also += 1;
                }
            }
            return Ok(gone + also);
        }
        Ok(gone)
    }

    async fn finished_signal(&self, queue: &QueueName) -> Result<Signal> {
        self.inner.history()?.finished_signal(queue).await
    }
}
