//! The model: its actions (each one `Backend` call, or a step of the
//! clock, a handler or a crash), their effect, and the properties.

use std::collections::BTreeSet;

use stateright::{Model, Property};

use crate::config::{Bounds, Faults, Protocol};
use crate::state::{
    Broken, End, Family, Fin, Ghost, Held, Item, Outcome, Phase, Probe, Slot, State, Token, Worker,
};

/// Never two live leases on one item (INV-2).
pub const ONE_LIVE_LEASE: &str = "never two live leases on one item";
/// No ack lands twice, and no item is reported acked twice.
pub const ACK_ONCE: &str = "no ack counted twice";
/// Every item is in the store, or left it through the one ack that landed.
pub const NOTHING_LOST: &str = "nothing lost";
/// Each expired lease is recovered exactly once (INV-4).
pub const REAPED_ONCE: &str = "each expired lease recovered once";
/// Every outcome a worker reports matches the store's history.
pub const TRUE_OUTCOMES: &str = "every reported outcome is true";
/// No item goes Dead through a lease whose claimer was never handed it.
pub const NO_DEAD_WITHOUT_RUN: &str = "no item Dead for an attempt that never ran";
/// Reachable (an example, not a failure): a worker reports an ack after
/// the network dropped a reply. Shows the lost-reply paths are explored.
pub const ACK_AFTER_LOSS: &str = "an ack is reported after a lost reply";
/// Reachable (an example): an item is Dead after a reaper recovered a
/// lease.
pub const DEAD_AFTER_REAP: &str = "an item is Dead after a reap";

/// The safety properties, in the order the figures list them.
pub const SAFETY: [&str; 6] = [
    ONE_LIVE_LEASE,
    ACK_ONCE,
    NOTHING_LOST,
    REAPED_ONCE,
    TRUE_OUTCOMES,
    NO_DEAD_WITHOUT_RUN,
];

/// One step of the model. Every worker and reaper step is one `Backend`
/// call ([`Action::call`]); `lost` means the network dropped its reply
/// after the call landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// The store's clock moves one step.
    Tick,
    /// `claim` (a new claim from an idle worker, or the same claim sent
    /// again after `recover_claim` found nothing).
    Claim {
        /// The worker.
        worker: u8,
        /// The reply is lost.
        lost: bool,
    },
    /// `recover_claim` of the claim whose reply was lost.
    Recover {
        /// The worker.
        worker: u8,
    },
    /// The handler runs on the worker's current lease (no store call).
    Run {
        /// The worker.
        worker: u8,
    },
    /// `extend` of the current lease by the lease length.
    Extend {
        /// The worker.
        worker: u8,
    },
    /// A finishing call on the current lease.
    Finish {
        /// The worker.
        worker: u8,
        /// The call.
        op: Fin,
        /// The reply is lost.
        lost: bool,
    },
    /// `lease_fate` of the lease being settled.
    Fate {
        /// The worker.
        worker: u8,
    },
    /// The finishing call sent again after `lease_fate` said Held.
    Resend {
        /// The worker.
        worker: u8,
    },
    /// The worker process dies; it restarts idle, knowing no lease.
    Crash {
        /// The worker.
        worker: u8,
    },
    /// `reap`: one atomic step.
    Reap {
        /// The reaper.
        reaper: u8,
    },
    /// Seeded fault: the first step of a two-step reap, reading the
    /// expired leases.
    ReapRead {
        /// The reaper.
        reaper: u8,
    },
    /// Seeded fault: the second step, requeueing what was read.
    ReapRequeue {
        /// The reaper.
        reaper: u8,
    },
}

impl Action {
    /// The `Backend` call this action makes (or what else it is).
    pub fn call(&self) -> &'static str {
        match self {
            Action::Tick => "clock",
            Action::Claim { .. } => "claim",
            Action::Recover { .. } => "recover_claim",
            Action::Run { .. } => "handler",
            Action::Extend { .. } => "extend",
            Action::Finish { op, .. } => op.call(),
            Action::Fate { .. } => "lease_fate",
            Action::Resend { .. } => "resend",
            Action::Crash { .. } => "crash",
            Action::Reap { .. } => "reap",
            Action::ReapRead { .. } => "reap (read step)",
            Action::ReapRequeue { .. } => "reap (requeue step)",
        }
    }
}

/// What the store answered to one action, and what a worker reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// No store call (the clock, a handler, a crash).
    Nothing,
    /// The leases a claim or `recover_claim` handed out: (item, token,
    /// expiry).
    Leases(Vec<(u8, Token, u8)>),
    /// A fenced call landed (`Ok`) or answered `LeaseLost`.
    Fenced(bool),
    /// An extend: the new expiry, or `None` for `LeaseLost`.
    Extended(Option<u8>),
    /// `lease_fate`'s answer.
    Fate(Fate),
    /// A reap: (requeued, dead).
    Reaped(u8, u8),
    /// A two-step reaper's read: the (item, token) pairs it saw expired.
    Read(Vec<(u8, Token)>),
}

/// `lease_fate`'s answer (`LeaseFate` without the state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fate {
    /// The token still holds the item.
    Held,
    /// "Your call ended it."
    Finished,
    /// "Someone else may have taken it."
    Lost,
}

/// One step as the trace shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What the store answered.
    pub reply: Reply,
    /// The network dropped the reply.
    pub lost: bool,
    /// What the worker reported at the end of this step: (item, token,
    /// outcome).
    pub report: Option<(u8, Token, Outcome)>,
}

impl Step {
    fn of(reply: Reply) -> Self {
        Step {
            reply,
            lost: false,
            report: None,
        }
    }
}

/// The lease protocol as a [`stateright::Model`].
#[derive(Debug, Clone)]
pub struct LeaseModel {
    /// The protocol variant.
    pub protocol: Protocol,
    /// Seeded faults.
    pub faults: Faults,
    /// The configuration's size.
    pub bounds: Bounds,
    only: Option<&'static str>,
}

impl LeaseModel {
    /// The model of `protocol` at `bounds`, with no fault.
    pub fn new(protocol: Protocol, bounds: Bounds) -> Self {
        LeaseModel {
            protocol,
            faults: Faults::default(),
            bounds,
            only: None,
        }
    }

    /// With `faults` seeded.
    #[must_use]
    pub fn faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self
    }

    /// Checks only the property `name` (one of the constants of this
    /// crate).
    #[must_use]
    pub fn only(mut self, name: &'static str) -> Self {
        self.only = Some(name);
        self
    }

    /// Whether finishing calls leave a trace `lease_fate` reads.
    fn finish_trace(&self) -> bool {
        self.protocol == Protocol::Fixed && !self.faults.fate_without_trace
    }

    /// Whether a reap leaves a trace of each lease it takes.
    fn takeover_trace(&self) -> bool {
        self.protocol == Protocol::Takeovers && !self.faults.reap_without_trace
    }

    /// Whether `recover_claim` renews the claim's expired, unreaped leases.
    fn recover_expired(&self) -> bool {
        self.protocol != Protocol::Today
    }

    /// The state every check starts from: every item Ready, every worker
    /// idle, the clock at 0.
    pub fn initial(&self) -> State {
        let n = self.bounds.items();
        State {
            now: 0,
            items: self
                .bounds
                .max_attempts
                .iter()
                .map(|&m| Item {
                    slot: Slot::Ready,
                    attempts: 0,
                    max_attempts: m,
                })
                .collect(),
            traces: BTreeSet::new(),
            takeovers: BTreeSet::new(),
            workers: (0..self.bounds.workers)
                .map(|_| Worker {
                    claims: 0,
                    phase: Phase::Idle,
                })
                .collect(),
            reapers: (0..self.bounds.reapers).map(|_| None).collect(),
            lost_left: self.bounds.lost_replies,
            crashes_left: self.bounds.crashes,
            ghost: Ghost {
                acks: vec![0; n],
                reported_acks: vec![0; n],
                ..Ghost::default()
            },
        }
    }

    /// Applies `a` to `s`: the next state and what the step answered, or
    /// `None` when the action is not enabled (or changes nothing).
    pub fn step(&self, s: &State, a: Action) -> Option<(State, Step)> {
        let mut n = s.clone();
        let step = match a {
            Action::Tick => {
                if n.now >= self.bounds.max_time {
                    return None;
                }
                n.now += 1;
                let now = n.now;
                for it in &mut n.items {
                    if matches!(it.slot, Slot::Scheduled { due } if due <= now) {
                        it.slot = Slot::Ready;
                    }
                }
                n.ghost.displaced.retain(|&(_, _, e)| e > now);
                Step::of(Reply::Nothing)
            }
            Action::Claim { worker, lost } => self.claim(&mut n, worker, lost)?,
            Action::Recover { worker } => self.recover(&mut n, worker)?,
            Action::Run { worker } => {
                let w = &mut n.workers[worker as usize];
                match &mut w.phase {
                    Phase::Holding { ran, .. } if !*ran => *ran = true,
                    _ => return None,
                }
                Step::of(Reply::Nothing)
            }
            Action::Extend { worker } => {
                let Phase::Holding { leases, .. } = &n.workers[worker as usize].phase else {
                    return None;
                };
                let held = leases[0];
                let expires = n.now + self.bounds.lease_steps;
                match &mut n.items[held.item as usize].slot {
                    Slot::Leased { token, expires: e } if *token == held.token => {
                        if *e >= expires {
                            return None;
                        }
                        *e = expires;
                    }
                    // A refused extend changes nothing; the worker learns
                    // of the loss from its finishing call.
                    _ => return None,
                }
                if let Phase::Holding { leases, .. } = &mut n.workers[worker as usize].phase {
                    leases[0].until = expires;
                }
                Step::of(Reply::Extended(Some(expires)))
            }
            Action::Finish { worker, op, lost } => {
                let Phase::Holding { leases, ran: true } = &n.workers[worker as usize].phase else {
                    return None;
                };
                if lost && n.lost_left == 0 {
                    return None;
                }
                let leases = leases.clone();
                let landed = self.finish(&mut n, leases[0], op);
                if lost {
                    n.lost_left -= 1;
                    n.workers[worker as usize].phase = Phase::Settling {
                        leases,
                        op,
                        probe: Probe::AfterUnknown,
                    };
                    Step {
                        reply: Reply::Fenced(landed),
                        lost: true,
                        report: None,
                    }
                } else if landed {
                    let report = self.report(&mut n, worker, leases, Outcome::Done(op));
                    Step {
                        reply: Reply::Fenced(true),
                        lost: false,
                        report: Some(report),
                    }
                } else {
                    n.workers[worker as usize].phase = Phase::Settling {
                        leases,
                        op,
                        probe: Probe::AfterFirstLost,
                    };
                    Step::of(Reply::Fenced(false))
                }
            }
            Action::Fate { worker } => {
                let Phase::Settling { leases, op, probe } = &n.workers[worker as usize].phase
                else {
                    return None;
                };
                let (leases, op, probe) = (leases.clone(), *op, *probe);
                let fate = self.lease_fate(&n, leases[0]);
                let outcome = match (probe, fate) {
                    (Probe::AfterUnknown, Fate::Held) => None,
                    (Probe::AfterUnknown, Fate::Finished) => Some(Outcome::Done(op)),
                    (Probe::AfterUnknown, Fate::Lost) => Some(Outcome::LeaseLost),
                    (Probe::AfterResendLost, Fate::Finished) => Some(Outcome::Done(op)),
                    (Probe::AfterFirstLost, Fate::Finished) => Some(Outcome::Vanished),
                    (_, _) => Some(Outcome::LeaseLost),
                };
                let report = match outcome {
                    None => {
                        n.workers[worker as usize].phase = Phase::Resend { leases, op };
                        None
                    }
                    Some(o) => Some(self.report(&mut n, worker, leases, o)),
                };
                Step {
                    reply: Reply::Fate(fate),
                    lost: false,
                    report,
                }
            }
            Action::Resend { worker } => {
                let Phase::Resend { leases, op } = &n.workers[worker as usize].phase else {
                    return None;
                };
                let (leases, op) = (leases.clone(), *op);
                let landed = self.finish(&mut n, leases[0], op);
                let report = if landed {
                    Some(self.report(&mut n, worker, leases, Outcome::Done(op)))
                } else {
                    n.workers[worker as usize].phase = Phase::Settling {
                        leases,
                        op,
                        probe: Probe::AfterResendLost,
                    };
                    None
                };
                Step {
                    reply: Reply::Fenced(landed),
                    lost: false,
                    report,
                }
            }
            Action::Crash { worker } => {
                let w = &mut n.workers[worker as usize];
                if n.crashes_left == 0 || w.phase == Phase::Idle {
                    return None;
                }
                w.phase = Phase::Idle;
                n.crashes_left -= 1;
                Step::of(Reply::Nothing)
            }
            Action::Reap { .. } => {
                if self.faults.two_step_reaper {
                    return None;
                }
                let expired = expired(&n);
                if expired.is_empty() {
                    return None;
                }
                let (mut requeued, mut dead) = (0, 0);
                for (i, t) in expired {
                    if self.recover_lease(&mut n, i, t) {
                        dead += 1;
                    } else {
                        requeued += 1;
                    }
                }
                Step::of(Reply::Reaped(requeued, dead))
            }
            Action::ReapRead { reaper } => {
                if !self.faults.two_step_reaper || n.reapers[reaper as usize].is_some() {
                    return None;
                }
                let read = expired(&n);
                if read.is_empty() {
                    return None;
                }
                n.reapers[reaper as usize] = Some(read.clone());
                Step::of(Reply::Read(read))
            }
            Action::ReapRequeue { reaper } => {
                let read = n.reapers[reaper as usize].take()?;
                let (mut requeued, mut dead) = (0, 0);
                for (i, read_token) in read {
                    // The fault: it checks that the item is Leased, not
                    // that its lease is the expired one it read.
                    let Slot::Leased { token, expires } = n.items[i as usize].slot else {
                        continue;
                    };
                    if token != read_token {
                        record_recovery(&mut n.ghost, i, read_token);
                        if expires > n.now {
                            n.ghost.displaced.insert((i, token, expires));
                        }
                    }
                    if self.recover_lease(&mut n, i, token) {
                        dead += 1;
                    } else {
                        requeued += 1;
                    }
                }
                Step::of(Reply::Reaped(requeued, dead))
            }
        };
        Some((n, step))
    }

    fn claim(&self, n: &mut State, worker: u8, lost: bool) -> Option<Step> {
        let w = &n.workers[worker as usize];
        let (family, fresh) = match w.phase {
            Phase::Idle if w.claims < self.bounds.claims_per_worker => (
                Family {
                    worker,
                    claim: w.claims,
                },
                true,
            ),
            Phase::Reclaim(f) => (f, false),
            _ => return None,
        };
        if lost && n.lost_left == 0 {
            return None;
        }
        let claimable: Vec<u8> = (0..n.items.len() as u8)
            .filter(|&i| n.items[i as usize].slot == Slot::Ready)
            .take(self.bounds.claim_max as usize)
            .collect();
        // An idle worker waits for work rather than claim nothing.
        if claimable.is_empty() && (fresh || lost) {
            return None;
        }
        let expires = n.now + self.bounds.lease_steps;
        let mut got = Vec::new();
        for (slot, &i) in claimable.iter().enumerate() {
            let token = Token {
                family,
                slot: slot as u8,
            };
            let it = &mut n.items[i as usize];
            it.attempts += 1;
            it.slot = Slot::Leased { token, expires };
            // The same claim sent again can hand an item the token it had
            // under the first send (reaped before anyone learnt of it): a
            // new lease, whose history starts afresh.
            n.ghost.ends.remove(&(i, token));
            n.ghost.abandoned.remove(&(i, token));
            // ... and drops the takeover trace of the first send's lease.
            if !self.faults.claim_keeps_takeover_trace {
                n.takeovers.remove(&(i, token));
            }
            got.push((i, token, expires));
        }
        let w = &mut n.workers[worker as usize];
        if fresh {
            w.claims += 1;
        }
        w.phase = if lost {
            Phase::Recovering(family)
        } else if got.is_empty() {
            Phase::Idle
        } else {
            Phase::Holding {
                leases: held(&got),
                ran: false,
            }
        };
        if lost {
            n.lost_left -= 1;
        }
        Some(Step {
            reply: Reply::Leases(got),
            lost,
            report: None,
        })
    }

    fn recover(&self, n: &mut State, worker: u8) -> Option<Step> {
        let Phase::Recovering(family) = n.workers[worker as usize].phase else {
            return None;
        };
        let now = n.now;
        let renewed = now + self.bounds.lease_steps;
        let mut got = Vec::new();
        for i in 0..n.items.len() {
            let Slot::Leased { token, expires } = &mut n.items[i].slot else {
                continue;
            };
            if token.family != family {
                continue;
            }
            if *expires > now {
                got.push((i as u8, *token, *expires));
            } else if self.recover_expired() {
                *expires = renewed;
                got.push((i as u8, *token, renewed));
            } else {
                n.ghost.abandoned.insert((i as u8, *token));
            }
        }
        got.sort_by_key(|&(_, t, _)| t);
        n.workers[worker as usize].phase = if got.is_empty() {
            Phase::Reclaim(family)
        } else {
            Phase::Holding {
                leases: held(&got),
                ran: false,
            }
        };
        Some(Step::of(Reply::Leases(got)))
    }

    /// A fenced finishing call in the store; whether it landed.
    fn finish(&self, n: &mut State, h: Held, op: Fin) -> bool {
        let now = n.now;
        let it = &mut n.items[h.item as usize];
        if !matches!(it.slot, Slot::Leased { token, .. } if token == h.token) {
            return false;
        }
        it.slot = match op {
            Fin::Ack => Slot::Acked,
            Fin::Fail => Slot::Dead,
            _ if it.attempts >= it.max_attempts => Slot::Dead,
            Fin::Release => Slot::Ready,
            Fin::ReleaseLater => Slot::Scheduled { due: now + 1 },
        };
        let g = &mut n.ghost;
        if op == Fin::Ack {
            g.acks[h.item as usize] += 1;
            if g.acks[h.item as usize] > 1 {
                g.broken.insert(Broken::AckTwice);
            }
        }
        g.ends.insert((h.item, h.token), op.end());
        if self.finish_trace() {
            n.traces.insert((h.item, h.token));
        }
        true
    }

    /// `lease_fate(lease, held_until)` in the store.
    fn lease_fate(&self, n: &State, h: Held) -> Fate {
        match n.items[h.item as usize].slot {
            Slot::Leased { token, .. } if token == h.token => Fate::Held,
            _ if self.finish_trace() && n.traces.contains(&(h.item, h.token)) => Fate::Finished,
            _ if n.now < h.until => Fate::Finished,
            // A takeover trace says a reap took this lease; none, that its
            // own call ended it (a claim that leased the item again under
            // the token dropped the earlier lease's trace). The traces'
            // memory is taken to outlast the run.
            _ if self.protocol == Protocol::Takeovers => {
                if n.takeovers.contains(&(h.item, h.token)) {
                    Fate::Lost
                } else {
                    Fate::Finished
                }
            }
            _ => Fate::Lost,
        }
    }

    /// A reaper recovers the lease `t` of item `i`; whether it went Dead.
    fn recover_lease(&self, n: &mut State, i: u8, t: Token) -> bool {
        record_recovery(&mut n.ghost, i, t);
        if self.takeover_trace() {
            n.takeovers.insert((i, t));
        }
        let it = &mut n.items[i as usize];
        if it.attempts >= it.max_attempts {
            it.slot = Slot::Dead;
            if n.ghost.abandoned.contains(&(i, t)) {
                n.ghost.broken.insert(Broken::DeadWithoutRun);
            }
            true
        } else {
            it.slot = Slot::Ready;
            false
        }
    }

    /// The worker reports `outcome` for its first lease, which the history
    /// judges, and moves on to its next lease.
    fn report(
        &self,
        n: &mut State,
        worker: u8,
        mut leases: Vec<Held>,
        outcome: Outcome,
    ) -> (u8, Token, Outcome) {
        let h = leases.remove(0);
        let end = n.ghost.ends.get(&(h.item, h.token)).copied();
        let true_ = match outcome {
            Outcome::Done(op) => end == Some(op.end()),
            Outcome::LeaseLost => end == Some(End::Reaped),
            // Nothing in the model loses a lease.
            Outcome::Vanished => false,
        };
        if !true_ {
            n.ghost.broken.insert(Broken::Misreport);
        }
        if outcome == Outcome::Done(Fin::Ack) {
            let r = &mut n.ghost.reported_acks[h.item as usize];
            *r += 1;
            if *r > 1 {
                n.ghost.broken.insert(Broken::AckTwice);
            }
        }
        n.workers[worker as usize].phase = if leases.is_empty() {
            Phase::Idle
        } else {
            Phase::Holding { leases, ran: false }
        };
        (h.item, h.token, outcome)
    }
}

/// The expired leases at the store's now, by item.
fn expired(s: &State) -> Vec<(u8, Token)> {
    s.items
        .iter()
        .enumerate()
        .filter_map(|(i, it)| match it.slot {
            Slot::Leased { token, expires } if expires <= s.now => Some((i as u8, token)),
            _ => None,
        })
        .collect()
}

fn record_recovery(g: &mut Ghost, i: u8, t: Token) {
    if g.ends.insert((i, t), End::Reaped).is_some() {
        g.broken.insert(Broken::DoubleRecovery);
    }
}

fn held(got: &[(u8, Token, u8)]) -> Vec<Held> {
    got.iter()
        .map(|&(item, token, until)| Held { item, token, until })
        .collect()
}

impl Model for LeaseModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial()]
    }

    /// The actions each worker's phase and each reaper allow; the few
    /// that turn out disabled (a lost reply with none left to lose, a
    /// refused extend) come back `None` from [`Model::next_state`], which
    /// the checker skips.
    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.now < self.bounds.max_time {
            actions.push(Action::Tick);
        }
        let lost: &[bool] = if s.lost_left > 0 {
            &[false, true]
        } else {
            &[false]
        };
        for (w, wk) in s.workers.iter().enumerate() {
            let worker = w as u8;
            match &wk.phase {
                Phase::Idle | Phase::Reclaim(_) => {
                    for &lost in lost {
                        actions.push(Action::Claim { worker, lost });
                    }
                }
                Phase::Recovering(_) => actions.push(Action::Recover { worker }),
                Phase::Holding { ran: false, .. } => {
                    actions.push(Action::Run { worker });
                    actions.push(Action::Extend { worker });
                }
                Phase::Holding { ran: true, .. } => {
                    actions.push(Action::Extend { worker });
                    for op in [Fin::Ack, Fin::Release, Fin::ReleaseLater, Fin::Fail] {
                        for &lost in lost {
                            actions.push(Action::Finish { worker, op, lost });
                        }
                    }
                }
                Phase::Settling { .. } => actions.push(Action::Fate { worker }),
                Phase::Resend { .. } => actions.push(Action::Resend { worker }),
            }
            if s.crashes_left > 0 && wk.phase != Phase::Idle {
                actions.push(Action::Crash { worker });
            }
        }
        for (r, read) in s.reapers.iter().enumerate() {
            let reaper = r as u8;
            if !self.faults.two_step_reaper {
                actions.push(Action::Reap { reaper });
            } else if read.is_some() {
                actions.push(Action::ReapRequeue { reaper });
            } else {
                actions.push(Action::ReapRead { reaper });
            }
        }
    }

    fn next_state(&self, s: &State, a: Action) -> Option<State> {
        self.step(s, a).map(|(n, _)| n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let all = vec![
            Property::<Self>::always(ONE_LIVE_LEASE, |_, s| {
                (0..s.items.len() as u8).all(|i| {
                    let current = matches!(s.items[i as usize].slot,
                        Slot::Leased { expires, .. } if expires > s.now);
                    let displaced = s
                        .ghost
                        .displaced
                        .iter()
                        .filter(|&&(j, _, e)| j == i && e > s.now)
                        .count();
                    usize::from(current) + displaced <= 1
                })
            }),
            Property::<Self>::always(ACK_ONCE, |_, s| !s.ghost.broken.contains(&Broken::AckTwice)),
            Property::<Self>::always(NOTHING_LOST, |_, s| {
                s.items.iter().zip(&s.ghost.acks).all(|(it, &acks)| {
                    // Gone only through the one ack that landed.
                    (it.slot == Slot::Acked) == (acks == 1)
                })
            }),
            Property::<Self>::always(REAPED_ONCE, |_, s| {
                !s.ghost.broken.contains(&Broken::DoubleRecovery)
            }),
            Property::<Self>::always(TRUE_OUTCOMES, |_, s| {
                !s.ghost.broken.contains(&Broken::Misreport)
            }),
            Property::<Self>::always(NO_DEAD_WITHOUT_RUN, |_, s| {
                !s.ghost.broken.contains(&Broken::DeadWithoutRun)
            }),
            Property::<Self>::sometimes(ACK_AFTER_LOSS, |_, s| {
                s.lost_left == 0 && s.ghost.reported_acks.iter().any(|&r| r > 0)
            }),
            Property::<Self>::sometimes(DEAD_AFTER_REAP, |_, s| {
                s.items.iter().any(|it| it.slot == Slot::Dead)
                    && s.ghost.ends.values().any(|&e| e == End::Reaped)
            }),
        ];
        match self.only {
            Some(name) => all.into_iter().filter(|p| p.name == name).collect(),
            None => all,
        }
    }
}
