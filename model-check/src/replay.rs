//! A path of the model replayed against the code: each action becomes the
//! `Backend` call it stands for, and every answer is compared with the
//! model's. Only the core calls are used (`enqueue`, `claim`,
//! `recover_claim`, `extend`, `ack`, `release`, `fail`, `lease_fate`,
//! `reap`, `item`), and a path replays only on a backend whose lease
//! traces are the model's protocol (`Capabilities::lease_traces`), without
//! seeded faults.
//!
//! - [`replay_on_memory`]: `leaseq_memory::MemoryBackend` (finishing
//!   traces, [`Protocol::Fixed`]) on a `ManualClock` that moves [`STEP`]
//!   per clock step; every expiry is compared to the millisecond.
//! - [`replay_on_redis`]: `leaseq_redis::RedisRsBackend` on a server
//!   (takeover traces, [`Protocol::Takeovers`]), under the key prefix the
//!   caller chose.
//! - [`replay_on_sqlite`]: `leaseq_sqlite::SqliteBackend` on
//!   `sqlite::memory:` (takeover traces, [`Protocol::Takeovers`]).
//!
//! Redis and SQLite read their own clocks, so there a clock step is a
//! sleep of [`REAL_STEP`], and expiries are not compared: only who holds
//! what, and every answer. (The test hook `expire_leases` cannot stand in
//! for the steps: it moves the expiries, not the clock, so a `lease_fate`
//! asked after the lease's `held_until` would still be before it.)

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{
    Backend, ClaimSpec, Claimed, Error, ItemId, ItemState, LeaseFate, LeaseKey, LeaseToken,
    LeaseTraces, LeaseTtl, ManualClock, NewItem, QueueName, Timestamp,
};
use leaseq_memory::MemoryBackend;
use leaseq_redis::{RedisOptions, RedisRsBackend};
use leaseq_sqlite::{SqliteBackend, SqliteOptions};

use crate::config::{Faults, Protocol};
use crate::model::{Action, Fate, LeaseModel, Reply};
use crate::state::{Family, Fin, Held, Phase, Slot, State, Token};

/// One clock step of the model on the manual clock.
pub const STEP: Duration = Duration::from_secs(1);

/// One clock step of the model on a backend's own clock: long enough that
/// a lease the model holds live is still live when the next call lands.
pub const REAL_STEP: Duration = Duration::from_millis(200);

/// What a replay saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// One line per action: the call and the backend's answer, which
    /// matched the model's.
    pub lines: Vec<String>,
    /// Each item's state at the end as the backend shows it (`None`: gone,
    /// i.e. acked), in model item order.
    pub items: Vec<Option<ItemState>>,
}

/// Replays `actions` of `model` against a fresh memory backend; `Err`
/// names the first step whose answer differs from the model's (or why the
/// path cannot be replayed).
pub fn replay_on_memory(model: &LeaseModel, actions: &[Action]) -> Result<Replayed, String> {
    runtime()?.block_on(async {
        let clock = ManualClock::new();
        let backend = MemoryBackend::with_clock(Arc::new(clock.clone()));
        Replay::run(model, backend, Clock::Manual(clock), actions).await
    })
}

/// Replays `actions` of `model` against a fresh SQLite backend in memory,
/// sleeping [`REAL_STEP`] per clock step; `Err` names the first step whose
/// answer differs from the model's (or why the path cannot be replayed).
pub fn replay_on_sqlite(model: &LeaseModel, actions: &[Action]) -> Result<Replayed, String> {
    runtime()?.block_on(async {
        let backend = SqliteBackend::connect("sqlite::memory:", SqliteOptions::new())
            .await
            .map_err(err("sqlite"))?;
        Replay::run(model, backend, Clock::Real, actions).await
    })
}

/// Replays `actions` of `model` against the Redis server of `options`
/// (under its key prefix, which the caller removes after), sleeping
/// [`REAL_STEP`] per clock step. `Err` names the first step whose answer
/// differs from the model's, or why the path cannot be replayed; one that
/// starts with `connect:` means no server answered.
pub fn replay_on_redis(
    model: &LeaseModel,
    actions: &[Action],
    options: RedisOptions,
) -> Result<Replayed, String> {
    runtime()?.block_on(async {
        let backend = RedisRsBackend::connect(options)
            .await
            .map_err(err("connect"))?;
        Replay::run(model, backend, Clock::Real, actions).await
    })
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("no runtime: {e}"))
}

/// The protocol a backend's lease traces follow, if the model has it.
fn protocol_of(traces: LeaseTraces) -> Option<Protocol> {
    match traces {
        LeaseTraces::None => Some(Protocol::Today),
        LeaseTraces::Finishes => Some(Protocol::Fixed),
        LeaseTraces::Takeovers => Some(Protocol::Takeovers),
        _ => None,
    }
}

/// How a clock step of the model reaches the backend.
enum Clock {
    /// The backend reads this clock: a step advances it by [`STEP`].
    Manual(ManualClock),
    /// The backend reads its own: a step is a sleep of [`REAL_STEP`].
    Real,
}

struct Replay<'a, B> {
    model: &'a LeaseModel,
    backend: B,
    clock: Clock,
    queue: QueueName,
    ids: Vec<ItemId>,
    t0: u64,
    /// The expiry the backend last told of each lease: what a worker
    /// passes to `lease_fate` as `held_until`.
    told: HashMap<(ItemId, LeaseToken), Timestamp>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn err(what: &str) -> impl Fn(Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl<'a, B: Backend> Replay<'a, B> {
    async fn run(
        model: &'a LeaseModel,
        backend: B,
        clock: Clock,
        actions: &[Action],
    ) -> Result<Replayed, String> {
        let traces = backend.capabilities().lease_traces;
        if protocol_of(traces) != Some(model.protocol) || model.faults != Faults::default() {
            return Err(format!(
                "the backend keeps {traces:?} lease traces: it runs neither {:?} nor a seeded fault",
                model.protocol
            ));
        }
        let queue = QueueName::new("model-replay").map_err(err("queue name"))?;
        let items: Vec<NewItem> = model
            .bounds
            .max_attempts
            .iter()
            .enumerate()
            .map(|(i, &m)| NewItem::new(vec![i as u8]).max_attempts(u32::from(m)))
            .collect();
        let ids = backend
            .enqueue(&queue, items)
            .await
            .map_err(err("enqueue"))?
            .into_iter()
            .map(|e| e.id)
            .collect();
        let t0 = backend.now().await.map_err(err("now"))?.as_millis();
        let mut r = Replay {
            model,
            backend,
            clock,
            queue,
            ids,
            t0,
            told: HashMap::new(),
        };
        let mut s = model.initial();
        let mut lines = Vec::new();
        for (k, &a) in actions.iter().enumerate() {
            let (next, step) = model
                .step(&s, a)
                .ok_or_else(|| format!("step {}: {a:?} is not enabled", k + 1))?;
            let got = r.call(&s, a).await?;
            let want = r.expected(&step.reply);
            if got != want {
                return Err(format!(
                    "step {} ({}): the backend answered {got}, the model {want}",
                    k + 1,
                    a.call()
                ));
            }
            lines.push(format!("{:>3}. {} -> {got}", k + 1, a.call()));
            s = next;
        }
        let mut states = Vec::new();
        for (i, it) in s.items.iter().enumerate() {
            let got = match r.backend.item(&r.queue, r.ids[i]).await {
                Ok(info) => Some(info.state),
                Err(Error::NotFound { .. }) => None,
                Err(e) => return Err(format!("item {i}: {e}")),
            };
            let want = match it.slot {
                Slot::Ready => Some(ItemState::Ready),
                Slot::Scheduled { .. } => Some(ItemState::Scheduled),
                Slot::Leased { .. } => Some(ItemState::Leased),
                Slot::Dead => Some(ItemState::Dead),
                Slot::Acked => None,
            };
            if got != want {
                return Err(format!(
                    "at the end item {i} is {got:?} in the backend, {want:?} in the model"
                ));
            }
            states.push(got);
        }
        Ok(Replayed {
            lines,
            items: states,
        })
    }

    /// Whether every expiry is compared (the backend reads the manual
    /// clock).
    fn exact(&self) -> bool {
        matches!(self.clock, Clock::Manual(_))
    }

    fn at(&self, t: u8) -> Timestamp {
        Timestamp::from_millis(self.t0 + u64::from(t) * ms(self.step()))
    }

    /// One clock step of the model on the backend's clock.
    fn step(&self) -> Duration {
        match self.clock {
            Clock::Manual(_) => STEP,
            Clock::Real => REAL_STEP,
        }
    }

    fn ttl(&self) -> Duration {
        self.step() * u32::from(self.model.bounds.lease_steps)
    }

    fn spec(&self, f: Family) -> Result<ClaimSpec, String> {
        let request = (u128::from(f.worker) + 1) << 64 | (u128::from(f.claim) + 1) << 32;
        ClaimSpec::with_request(
            u32::from(self.model.bounds.claim_max),
            self.ttl(),
            LeaseToken::from_u128(request),
        )
        .map_err(err("claim spec"))
    }

    fn token(&self, t: Token) -> Result<LeaseToken, String> {
        Ok(self.spec(t.family)?.token(u32::from(t.slot)))
    }

    fn key(&self, h: Held) -> Result<LeaseKey, String> {
        Ok(LeaseKey {
            queue: self.queue.clone(),
            id: self.ids[h.item as usize],
            token: self.token(h.token)?,
        })
    }

    /// The model's answer in the words [`Replay::call`] uses.
    fn expected(&self, reply: &Reply) -> String {
        match reply {
            Reply::Nothing => "-".to_string(),
            Reply::Leases(v) => {
                let l: Vec<String> = v
                    .iter()
                    .map(|&(i, t, e)| {
                        let token = self.token(t).map(|t| t.to_string()).unwrap_or_default();
                        let id = self.ids[i as usize];
                        if self.exact() {
                            format!("{id} {token} until {}", self.at(e))
                        } else {
                            format!("{id} {token}")
                        }
                    })
                    .collect();
                format!("[{}]", l.join(", "))
            }
            Reply::Fenced(true) => "Ok".to_string(),
            Reply::Fenced(false) | Reply::Extended(None) => "LeaseLost".to_string(),
            Reply::Extended(Some(e)) if self.exact() => format!("Ok until {}", self.at(*e)),
            Reply::Extended(Some(_)) => "Ok".to_string(),
            Reply::Fate(f) => format!("{f:?}"),
            Reply::Reaped(r, d) => format!("requeued {r}, dead {d}"),
            Reply::Read(_) => "unsupported".to_string(),
        }
    }

    fn leases(&mut self, c: Result<Claimed, Error>) -> Result<String, String> {
        let c = c.map_err(err("claim"))?;
        let mut l = Vec::new();
        for lease in &c.leases {
            let (id, token) = (lease.key.id, lease.key.token);
            self.told.insert((id, token), lease.expires_at);
            l.push(if self.exact() {
                format!("{id} {token} until {}", lease.expires_at)
            } else {
                format!("{id} {token}")
            });
        }
        Ok(format!("[{}]", l.join(", ")))
    }

    /// Makes the call `a` stands for, from the state `s` before it.
    async fn call(&mut self, s: &State, a: Action) -> Result<String, String> {
        let b = &self.backend;
        let first = |w: u8| match &s.workers[w as usize].phase {
            Phase::Holding { leases, .. }
            | Phase::Settling { leases, .. }
            | Phase::Resend { leases, .. } => leases
                .first()
                .copied()
                .ok_or_else(|| "a worker holds no lease".to_string()),
            _ => Err("a worker holds no lease".to_string()),
        };
        let fenced = |r: Result<(), Error>| match r {
            Ok(()) => Ok("Ok".to_string()),
            Err(e) if e.is_lease_lost() => Ok("LeaseLost".to_string()),
            Err(e) => Err(format!("fenced call: {e}")),
        };
        match a {
            Action::Tick => {
                match &self.clock {
                    Clock::Manual(c) => c.advance(STEP),
                    Clock::Real => tokio::time::sleep(REAL_STEP).await,
                }
                Ok("-".to_string())
            }
            Action::Run { .. } | Action::Crash { .. } => Ok("-".to_string()),
            Action::Claim { worker, .. } => {
                let w = &s.workers[worker as usize];
                let f = match w.phase {
                    Phase::Reclaim(f) => f,
                    _ => Family {
                        worker,
                        claim: w.claims,
                    },
                };
                let claimed = b.claim(&self.queue, self.spec(f)?).await;
                self.leases(claimed)
            }
            Action::Recover { worker } => {
                let Phase::Recovering(f) = s.workers[worker as usize].phase else {
                    return Err("recover_claim without a lost claim".to_string());
                };
                let recovered = b.recover_claim(&self.queue, &self.spec(f)?).await;
                self.leases(recovered)
            }
            Action::Extend { worker } => {
                let ttl = LeaseTtl::new(self.ttl()).map_err(err("ttl"))?;
                let key = self.key(first(worker)?)?;
                match b.extend(&key, ttl).await.map(|e| e.expires_at) {
                    Ok(t) => {
                        self.told.insert((key.id, key.token), t);
                        Ok(if self.exact() {
                            format!("Ok until {t}")
                        } else {
                            "Ok".to_string()
                        })
                    }
                    Err(e) if e.is_lease_lost() => Ok("LeaseLost".to_string()),
                    Err(e) => Err(format!("extend: {e}")),
                }
            }
            Action::Finish { worker, op, .. } => {
                fenced(self.finish(self.key(first(worker)?)?, op).await)
            }
            Action::Resend { worker } => {
                let Phase::Resend { op, .. } = s.workers[worker as usize].phase else {
                    return Err("resend without a call to send again".to_string());
                };
                fenced(self.finish(self.key(first(worker)?)?, op).await)
            }
            Action::Fate { worker } => {
                let key = self.key(first(worker)?)?;
                let held_until = *self
                    .told
                    .get(&(key.id, key.token))
                    .ok_or("lease_fate of a lease the backend never told of")?;
                let fate = b
                    .lease_fate(&key, held_until)
                    .await
                    .map_err(err("lease_fate"))?;
                Ok(match fate {
                    LeaseFate::Held => format!("{:?}", Fate::Held),
                    LeaseFate::Finished { .. } => format!("{:?}", Fate::Finished),
                    _ => format!("{:?}", Fate::Lost),
                })
            }
            Action::Reap { .. } => {
                let r = b.reap(&self.queue).await.map_err(err("reap"))?;
                Ok(format!("requeued {}, dead {}", r.requeued, r.dead))
            }
            Action::ReapRead { .. } | Action::ReapRequeue { .. } => {
                Err("a two-step reaper is a seeded fault, not a backend call".to_string())
            }
        }
    }

    async fn finish(&self, key: LeaseKey, op: Fin) -> Result<(), Error> {
        let b = &self.backend;
        match op {
            Fin::Ack => b.ack(&key).await,
            Fin::Release => b.release(&key, Duration::ZERO).await.map(|_| ()),
            Fin::ReleaseLater => b.release(&key, self.step()).await.map(|_| ()),
            Fin::Fail => b.fail(&key, "model").await,
        }
    }
}
