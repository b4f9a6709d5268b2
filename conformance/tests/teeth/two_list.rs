//! A faithful copy of the broken two-list "reliable queue": an `avail` LIST
//! of ids, an `items` HASH of records, a `claimed` LIST, and a `lease:<id>`
//! key with a TTL per claimed item. Every step below is one "command"
//! (one short critical section); the `.await` between commands is a round
//! trip, in which other clients run. Its four races, as the suite must see
//! them:
//! - R1 duplicate requeue: GC reads `claimed`, checks each lease, and only
//!   then, in a separate step, does `LREM claimed id; LPUSH avail id`, which
//!   pushes even when the LREM removed nothing.
//! - R2 claim-to-lease gap: `RPOPLPUSH avail claimed` and `SETEX lease` are
//!   separate steps, and claim runs GC first.
//! - R3 unfenced ack/release/extend/fail: by id alone.
//! - R4 ghost: a claim that pops an id without a record returns nothing and
//!   sets no lease.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::limits::{check_batch, check_delay, clamp_reason};
use leaseq_core::testing::{IndexSnapshot, TestHooks};
use leaseq_core::{
    Admin, Backend, Bytes, Capabilities, ClaimSpec, Claimed, Clock, Enqueued, Error, Extended,
    Groups, ItemId, ItemInfo, ItemState, Lease, LeaseFate, LeaseKey, LeaseToken, LeaseTtl, NewItem,
    QueueName, QueueStats, ReapReport, Released, Result, Timestamp,
};

#[derive(Debug, Clone)]
struct Record {
    payload: Bytes,
    priority: i32,
    attempts: u32,
    max_attempts: u32,
    last_error: Option<String>,
    enqueued_at: Timestamp,
}

#[derive(Debug, Default)]
struct Keys {
    next_id: u64,
    /// LPUSH at the front, RPOP from the back.
    avail: VecDeque<u64>,
    items: HashMap<u64, Record>,
    claimed: VecDeque<u64>,
    /// `lease:<id>` → (expires at ms, token). Gone once expired.
    leases: HashMap<u64, (u64, LeaseToken)>,
    dead: Vec<u64>,
}

/// The two-list backend.
#[derive(Debug)]
pub(crate) struct TwoList {
    clock: Arc<dyn Clock>,
    queues: Mutex<HashMap<QueueName, Keys>>,
}

impl TwoList {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        TwoList {
            clock,
            queues: Mutex::new(HashMap::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        self.clock.now().as_millis()
    }

    /// One command against the queue's keys.
    fn cmd<T>(&self, q: &QueueName, f: impl FnOnce(&mut Keys, u64) -> T) -> T {
        let now = self.now_ms();
        let mut all = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        f(all.entry(q.clone()).or_default(), now)
    }

    /// `EXISTS lease:<id>`: false once its TTL ran out.
    fn lease_exists(k: &Keys, id: u64, now: u64) -> bool {
        k.leases.get(&id).is_some_and(|(exp, _)| *exp > now)
    }

    /// A round trip: other clients run meanwhile.
    async fn rtt() {
        tokio::task::yield_now().await;
    }

    /// A slower round trip where the design has its races.
    async fn gap() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }

    fn info(k: &Keys, id: u64, now: u64) -> Option<ItemInfo> {
        let r = k.items.get(&id)?;
        let (state, due_at) = if k.dead.contains(&id) {
            (ItemState::Dead, None)
        } else if k.claimed.contains(&id) && k.leases.contains_key(&id) {
            (
                ItemState::Leased,
                k.leases.get(&id).map(|(e, _)| Timestamp::from_millis(*e)),
            )
        } else {
            (ItemState::Ready, None)
        };
        let _ = now;
        Some(ItemInfo {
            id: ItemId::new(id),
            state,
            payload: r.payload.clone(),
            priority: r.priority,
            attempts: r.attempts,
            max_attempts: r.max_attempts,
            dedup_key: None,
            due_at,
            last_error: r.last_error.clone(),
            enqueued_at: r.enqueued_at,
            progress: None,
            cancel_requested: false,
        })
    }

    /// `LREM claimed id; DEL lease:<id>` then a push: the unfenced finish.
    fn finish(k: &mut Keys, id: u64) {
        k.claimed.retain(|c| *c != id);
        k.leases.remove(&id);
    }

    fn exists(&self, lease: &LeaseKey) -> Result<()> {
        let found = self.cmd(&lease.queue, |k, _| k.items.contains_key(&lease.id.get()));
        if found {
            Ok(())
        } else {
            Err(Error::LeaseLost { id: lease.id })
        }
    }
}

#[async_trait]
impl Backend for TwoList {
    fn capabilities(&self) -> Capabilities {
        Capabilities::all_features()
            .dedup(false)
            .priorities(false)
            .delays(false)
    }

    async fn now(&self) -> Result<Timestamp> {
        Ok(self.clock.now())
    }

    async fn enqueue(&self, queue: &QueueName, items: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        check_batch(&items, &self.capabilities().bounds)?;
        let mut out = Vec::new();
        for item in items {
            let id = self.cmd(queue, |k, _| {
                k.next_id += 1;
                k.next_id
            });
            self.cmd(queue, |k, now| {
                let record = Record {
                    payload: item.payload.clone(),
                    priority: item.priority,
                    attempts: 0,
                    max_attempts: item.max_attempts,
                    last_error: None,
                    enqueued_at: Timestamp::from_millis(now),
                };
                k.items.insert(id, record);
                k.avail.push_front(id);
            });
            out.push(Enqueued {
                id: ItemId::new(id),
                deduplicated: false,
            });
        }
        Ok(out)
    }

    async fn claim(&self, queue: &QueueName, spec: ClaimSpec) -> Result<Claimed> {
        // The design runs its GC on every claim.
        self.reap(queue).await?;
        let mut leases = Vec::new();
        while leases.len() < spec.max() as usize {
            let popped = self.cmd(queue, |k, _| {
                let id = k.avail.pop_back()?;
                k.claimed.push_front(id);
                Some(id)
            });
            let Some(id) = popped else { break };
            Self::rtt().await;
            let record = self.cmd(queue, |k, _| k.items.get(&id).cloned());
            // R4: no record: the claim returns what it has, sets no lease,
            // and leaves the id in `claimed` for GC to push back.
            let Some(record) = record else { break };
            Self::gap().await;
            let token = LeaseToken::random();
            let (expires, attempts) = self.cmd(queue, |k, now| {
                let expires = now + spec.ttl().as_millis();
                k.leases.insert(id, (expires, token));
                let r = k.items.get_mut(&id).map(|r| {
                    r.attempts += 1;
                    r.attempts
                });
                (expires, r.unwrap_or(record.attempts + 1))
            });
            leases.push(Lease {
                key: LeaseKey {
                    queue: queue.clone(),
                    id: ItemId::new(id),
                    token,
                },
                payload: record.payload,
                attempts,
                max_attempts: record.max_attempts,
                priority: record.priority,
                expires_at: Timestamp::from_millis(expires),
                enqueued_at: record.enqueued_at,
            });
        }
        Ok(Claimed {
            leases,
            repairs: Vec::new(),
            retry_after: None,
            paused: false,
        })
    }

    async fn ack(&self, lease: &LeaseKey) -> Result<()> {
        let id = lease.id.get();
        self.exists(lease)?;
        self.cmd(&lease.queue, |k, _| {
            Self::finish(k, id);
            k.items.remove(&id);
        });
        Ok(())
    }

    async fn extend(&self, lease: &LeaseKey, ttl: LeaseTtl) -> Result<Extended> {
        self.exists(lease)?;
        let exp = self.cmd(&lease.queue, |k, now| {
            let exp = now + ttl.as_millis();
            k.leases.insert(lease.id.get(), (exp, lease.token));
            exp
        });
        Ok(Extended::until(Timestamp::from_millis(exp)))
    }

    async fn release(&self, lease: &LeaseKey, delay: Duration) -> Result<Released> {
        check_delay(delay)?;
        self.exists(lease)?;
        let id = lease.id.get();
        Ok(self.cmd(&lease.queue, |k, _| {
            Self::finish(k, id);
            let exhausted = k
                .items
                .get(&id)
                .is_some_and(|r| r.attempts >= r.max_attempts);
            if exhausted {
                if let Some(r) = k.items.get_mut(&id) {
                    r.last_error = Some("attempts exhausted".into());
                }
                k.dead.push(id);
                Released::Dead
            } else {
                k.avail.push_front(id);
                Released::Ready
            }
        }))
    }

    async fn fail(&self, lease: &LeaseKey, reason: &str) -> Result<()> {
        self.exists(lease)?;
        let id = lease.id.get();
        self.cmd(&lease.queue, |k, _| {
            Self::finish(k, id);
            if let Some(r) = k.items.get_mut(&id) {
                r.last_error = Some(clamp_reason(reason).to_string());
            }
            k.dead.push(id);
        });
        Ok(())
    }

    async fn reap(&self, queue: &QueueName) -> Result<ReapReport> {
        let mut report = ReapReport::default();
        let claimed: Vec<u64> = self.cmd(queue, |k, _| k.claimed.iter().copied().collect());
        for id in claimed {
            let expired = self.cmd(queue, |k, now| !Self::lease_exists(k, id, now));
            if !expired {
                continue;
            }
            // R1: the check and the push are separate steps.
            Self::gap().await;
            let dead = self.cmd(queue, |k, _| {
                k.claimed.retain(|c| *c != id);
                k.leases.remove(&id);
                let exhausted = k
                    .items
                    .get(&id)
                    .is_some_and(|r| r.attempts >= r.max_attempts);
                if exhausted {
                    if let Some(r) = k.items.get_mut(&id) {
                        r.last_error = Some("lease expired on final attempt".into());
                    }
                    k.dead.push(id);
                } else {
                    k.avail.push_front(id);
                }
                exhausted
            });
            if dead {
                report.dead += 1;
            } else {
                report.requeued += 1;
            }
        }
        Ok(report)
    }

    async fn stats(&self, queue: &QueueName) -> Result<QueueStats> {
        Ok(self.cmd(queue, |k, now| {
            let _ = now;
            let leased = k
                .claimed
                .iter()
                .filter(|id| k.leases.contains_key(id))
                .count();
            QueueStats {
                ready: (k.avail.len() + k.claimed.len() - leased) as u64,
                scheduled: 0,
                leased: leased as u64,
                dead: k.dead.len() as u64,
                paused: false,
                completed: None,
            }
        }))
    }

    async fn queues(&self) -> Result<Vec<QueueName>> {
        let all = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<QueueName> = all
            .iter()
            .filter(|(_, k)| !(k.avail.is_empty() && k.claimed.is_empty() && k.dead.is_empty()))
            .map(|(q, _)| q.clone())
            .collect();
        out.sort();
        Ok(out)
    }

    async fn peek(
        &self,
        queue: &QueueName,
        state: ItemState,
        limit: usize,
    ) -> Result<Vec<ItemInfo>> {
        Ok(self.cmd(queue, |k, now| {
            let ids: Vec<u64> = match state {
                ItemState::Ready => k.avail.iter().rev().copied().collect(),
                ItemState::Leased => k.claimed.iter().rev().copied().collect(),
                ItemState::Dead => k.dead.clone(),
                ItemState::Scheduled => Vec::new(),
            };
            ids.into_iter()
                .filter_map(|id| Self::info(k, id, now))
                .take(limit)
                .collect()
        }))
    }

    async fn item(&self, queue: &QueueName, id: ItemId) -> Result<ItemInfo> {
        self.cmd(queue, |k, now| Self::info(k, id.get(), now))
            .ok_or(Error::NotFound { id })
    }

    // What the trait once gave by default: this backend predates them.
    async fn enqueue_once(
        &self,
        _: &QueueName,
        _: LeaseToken,
        _: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        Err(Error::unsupported("enqueue_once"))
    }

    async fn recover_claim(&self, _: &QueueName, _: &ClaimSpec) -> Result<Claimed> {
        Err(Error::unsupported("recover_claim"))
    }

    async fn lease_fate(&self, _: &LeaseKey, _: Timestamp) -> Result<LeaseFate> {
        Err(Error::unsupported("lease_fate"))
    }

    async fn ack_many(&self, leases: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        leaseq_core::limits::check_ack_batch(leases.len())?;
        let mut out = Vec::with_capacity(leases.len());
        for lease in leases {
            match self.ack(lease).await {
                Err(e @ Error::LeaseLost { .. }) => out.push(Err(e)),
                Err(e) => return Err(e),
                Ok(()) => out.push(Ok(())),
            }
        }
        Ok(out)
    }

    async fn give_back(&self, _: &LeaseKey) -> Result<()> {
        Err(Error::unsupported("give_back"))
    }

    async fn wait_for_work(&self, _: &QueueName, timeout: Duration) {
        tokio::time::sleep(timeout).await;
    }

    fn groups(&self) -> Groups<'_> {
        Groups::none().admin(self).test_hooks(Some(self))
    }
}

#[async_trait]
impl Admin for TwoList {
    async fn redrive(&self, queue: &QueueName, limit: usize) -> Result<u64> {
        Ok(self.cmd(queue, |k, _| {
            let n = limit.min(k.dead.len());
            let moved: Vec<u64> = k.dead.drain(..n).collect();
            for id in &moved {
                if let Some(r) = k.items.get_mut(id) {
                    r.attempts = 0;
                }
                k.avail.push_front(*id);
            }
            moved.len() as u64
        }))
    }

    async fn redrive_item(&self, queue: &QueueName, id: ItemId) -> Result<bool> {
        self.cmd(queue, |k, _| {
            let raw = id.get();
            if !k.items.contains_key(&raw) {
                return Err(Error::NotFound { id });
            }
            let Some(at) = k.dead.iter().position(|d| *d == raw) else {
                return Ok(false);
            };
            k.dead.remove(at);
            if let Some(r) = k.items.get_mut(&raw) {
                r.attempts = 0;
            }
            k.avail.push_front(raw);
            Ok(true)
        })
    }

    async fn purge(&self, queue: &QueueName) -> Result<u64> {
        Ok(self.cmd(queue, |k, _| {
            let n = k.items.len() as u64;
            *k = Keys {
                next_id: k.next_id,
                ..Keys::default()
            };
            n
        }))
    }

    async fn remove_item(&self, queue: &QueueName, id: ItemId) -> Result<ItemState> {
        self.cmd(queue, |k, now| {
            let raw = id.get();
            let info = Self::info(k, raw, now).ok_or(Error::NotFound { id })?;
            k.items.remove(&raw);
            k.avail.retain(|i| *i != raw);
            k.claimed.retain(|i| *i != raw);
            k.dead.retain(|i| *i != raw);
            k.leases.remove(&raw);
            Ok(info.state)
        })
    }

    /// As a purge: the id counter is all the queue keeps.
    async fn delete_queue(&self, queue: &QueueName) -> Result<u64> {
        self.purge(queue).await
    }
}

#[async_trait]
impl TestHooks for TwoList {
    async fn expire_leases(&self, queue: &QueueName) -> Result<u64> {
        Ok(self.cmd(queue, |k, now| {
            let n = k.leases.len() as u64;
            for (exp, _) in k.leases.values_mut() {
                *exp = now;
            }
            n
        }))
    }

    async fn make_due(&self, _queue: &QueueName) -> Result<u64> {
        Ok(0)
    }

    async fn plant_dangling_ready(&self, queue: &QueueName, id: ItemId) -> Result<()> {
        self.cmd(queue, |k, _| k.avail.push_back(id.get()));
        Ok(())
    }

    async fn snapshot(&self, queue: &QueueName) -> Result<IndexSnapshot> {
        Ok(self.cmd(queue, |k, _| {
            let mut s = IndexSnapshot::default();
            s.indexes.insert(
                ItemState::Ready,
                k.avail.iter().rev().map(|i| ItemId::new(*i)).collect(),
            );
            s.indexes.insert(
                ItemState::Leased,
                k.claimed.iter().rev().map(|i| ItemId::new(*i)).collect(),
            );
            s.indexes.insert(
                ItemState::Dead,
                k.dead.iter().map(|i| ItemId::new(*i)).collect(),
            );
            s.items = k.items.keys().map(|i| ItemId::new(*i)).collect();
            s
        }))
    }
}
