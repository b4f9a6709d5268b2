//! A path of the model replayed against the code: each action becomes the
//! `Backend` call it stands for, on a `leaseq_memory::MemoryBackend` whose
//! `ManualClock` moves one second per clock step, and every answer is
//! compared with the model's. Only the core calls are used (`enqueue`,
//! `claim`, `recover_claim`, `extend`, `ack`, `release`, `fail`,
//! `lease_fate`, `reap`, `item`), and only [`Protocol::Today`] without
//! seeded faults can be replayed: it is the protocol the code has.

use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{
    Backend, ClaimSpec, Claimed, Error, ItemId, ItemState, LeaseFate, LeaseKey, LeaseToken,
    LeaseTtl, ManualClock, NewItem, QueueName, Timestamp,
};
use leaseq_memory::MemoryBackend;

use crate::config::{Faults, Protocol};
use crate::model::{Action, Fate, LeaseModel, Reply};
use crate::state::{Family, Fin, Held, Phase, Slot, State, Token};

/// One clock step of the model on the manual clock.
pub const STEP: Duration = Duration::from_secs(1);

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
    // The memory backend keeps finishing traces and renews expired,
    // unreaped leases on recovery: it follows the fixed protocol.
    if model.protocol != Protocol::Fixed || model.faults != Faults::default() {
        return Err("only the fixed protocol without seeded faults is the code's".to_string());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("no runtime: {e}"))?;
    rt.block_on(Replay::run(model, actions))
}

struct Replay<'a> {
    model: &'a LeaseModel,
    backend: MemoryBackend,
    clock: ManualClock,
    queue: QueueName,
    ids: Vec<ItemId>,
    t0: u64,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn err(what: &str) -> impl Fn(Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl<'a> Replay<'a> {
    async fn run(model: &'a LeaseModel, actions: &[Action]) -> Result<Replayed, String> {
        let clock = ManualClock::new();
        let backend = MemoryBackend::with_clock(Arc::new(clock.clone()));
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

    fn at(&self, t: u8) -> Timestamp {
        Timestamp::from_millis(self.t0 + u64::from(t) * ms(STEP))
    }

    fn ttl(&self) -> Duration {
        STEP * u32::from(self.model.bounds.lease_steps)
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
                        format!("{} {token} until {}", self.ids[i as usize], self.at(e))
                    })
                    .collect();
                format!("[{}]", l.join(", "))
            }
            Reply::Fenced(true) => "Ok".to_string(),
            Reply::Fenced(false) | Reply::Extended(None) => "LeaseLost".to_string(),
            Reply::Extended(Some(e)) => format!("Ok until {}", self.at(*e)),
            Reply::Fate(f) => format!("{f:?}"),
            Reply::Reaped(r, d) => format!("requeued {r}, dead {d}"),
            Reply::Read(_) => "unsupported".to_string(),
        }
    }

    fn leases(&self, c: Result<Claimed, Error>) -> Result<String, String> {
        let c = c.map_err(err("claim"))?;
        let l: Vec<String> = c
            .leases
            .iter()
            .map(|l| format!("{} {} until {}", l.key.id, l.key.token, l.expires_at))
            .collect();
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
                self.clock.advance(STEP);
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
                self.leases(b.claim(&self.queue, self.spec(f)?).await)
            }
            Action::Recover { worker } => {
                let Phase::Recovering(f) = s.workers[worker as usize].phase else {
                    return Err("recover_claim without a lost claim".to_string());
                };
                self.leases(b.recover_claim(&self.queue, &self.spec(f)?).await)
            }
            Action::Extend { worker } => {
                let ttl = LeaseTtl::new(self.ttl()).map_err(err("ttl"))?;
                match b.extend(&self.key(first(worker)?)?, ttl).await {
                    Ok(t) => Ok(format!("Ok until {t}")),
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
                let h = first(worker)?;
                let fate = b
                    .lease_fate(&self.key(h)?, self.at(h.until))
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
            Fin::ReleaseLater => b.release(&key, STEP).await.map(|_| ()),
            Fin::Fail => b.fail(&key, "model").await,
        }
    }
}
