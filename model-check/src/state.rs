//! The model's state: the store, the workers, the reapers, what the
//! network may still drop, and ghost variables that record history for the
//! properties (never read by the protocol itself).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A claim's identity: the `ClaimSpec` token family. Worker `worker`'s
/// `claim`-th claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Family {
    /// The worker that made the claim.
    pub worker: u8,
    /// Its number among that worker's claims.
    pub claim: u8,
}

/// A lease token: slot `slot` of a claim's family (`ClaimSpec::token`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    /// The claim that handed it out.
    pub family: Family,
    /// Its slot in the claim.
    pub slot: u8,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "w{}#{}.{}",
            self.family.worker, self.family.claim, self.slot
        )
    }
}

/// Where an item is in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// Claimable now.
    Ready,
    /// Claimable from clock step `due` (a released item with a delay).
    Scheduled {
        /// The step it falls due.
        due: u8,
    },
    /// Held under `token` until `expires`.
    Leased {
        /// The fence.
        token: Token,
        /// The step the lease expires at (expired when now >= expires).
        expires: u8,
    },
    /// Given up; kept for inspection.
    Dead,
    /// Acked: gone from the store.
    Acked,
}

/// One item of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Item {
    /// Its state.
    pub slot: Slot,
    /// Times it was claimed.
    pub attempts: u8,
    /// Attempts allowed.
    pub max_attempts: u8,
}

/// A finishing call a worker makes on a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fin {
    /// `ack`.
    Ack,
    /// `release` with no delay.
    Release,
    /// `release` with a delay of one clock step.
    ReleaseLater,
    /// `fail`.
    Fail,
}

impl Fin {
    /// How the store's history records this call ending a lease.
    pub fn end(self) -> End {
        match self {
            Fin::Ack => End::Acked,
            Fin::Release | Fin::ReleaseLater => End::Released,
            Fin::Fail => End::Failed,
        }
    }

    /// The `Backend` method.
    pub fn call(self) -> &'static str {
        match self {
            Fin::Ack => "ack",
            Fin::Release => "release(0)",
            Fin::ReleaseLater => "release(1 step)",
            Fin::Fail => "fail",
        }
    }
}

/// What ended a lease, as the store's history (a ghost) records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum End {
    /// Its own ack landed.
    Acked,
    /// Its own release landed.
    Released,
    /// Its own fail landed.
    Failed,
    /// A reaper took it (someone else).
    Reaped,
}

/// A lease as its worker knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Held {
    /// The item.
    pub item: u8,
    /// The token.
    pub token: Token,
    /// The latest expiry the worker knows (`settle::Held::until`).
    pub until: u8,
}

/// Which question a worker's `lease_fate` call answers (the three uses in
/// `settle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Probe {
    /// The call's reply was lost: did it land?
    AfterUnknown,
    /// A resend after a lost reply answered `LeaseLost`: did the first
    /// send land?
    AfterResendLost,
    /// The first send answered `LeaseLost`: lost, or vanished?
    AfterFirstLost,
}

/// What a worker is doing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Waiting for work (or restarted after a crash).
    Idle,
    /// Its claim's reply was lost; next: `recover_claim`.
    Recovering(Family),
    /// `recover_claim` found nothing; next: the same claim again.
    Reclaim(Family),
    /// Holding leases; works on the first.
    Holding {
        /// Its leases, in claim order.
        leases: Vec<Held>,
        /// Whether the handler ran for the first.
        ran: bool,
    },
    /// Settling a finishing call on the first lease with `lease_fate`.
    Settling {
        /// Its leases, the one being settled first.
        leases: Vec<Held>,
        /// The call.
        op: Fin,
        /// Which question.
        probe: Probe,
    },
    /// `lease_fate` said Held: the call is sent again.
    Resend {
        /// Its leases, the one being settled first.
        leases: Vec<Held>,
        /// The call.
        op: Fin,
    },
}

/// One worker.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Worker {
    /// Claims it has made.
    pub claims: u8,
    /// What it is doing.
    pub phase: Phase,
}

/// What a worker reports about a lease at the end of settling it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The call succeeded (its work landed).
    Done(Fin),
    /// `LeaseLost`: someone else took the lease.
    LeaseLost,
    /// `LeaseVanished`: the store lost the lease.
    Vanished,
}

/// A property a transition broke, recorded when it happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Broken {
    /// A worker reported an outcome the store's history contradicts.
    Misreport,
    /// One expired lease was recovered twice.
    DoubleRecovery,
    /// An item went Dead through a lease its claimer was never handed.
    DeadWithoutRun,
    /// A second ack landed, or a second worker reported an item acked.
    AckTwice,
}

/// History the properties read; the protocol never does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Ghost {
    /// What ended each lease, by (item, token).
    pub ends: BTreeMap<(u8, Token), End>,
    /// Leases moved off their item while live by a step that was not
    /// theirs, with their expiry: their holders still think them live.
    pub displaced: BTreeSet<(u8, Token, u8)>,
    /// Acks that landed, per item.
    pub acks: Vec<u8>,
    /// Acks workers reported, per item.
    pub reported_acks: Vec<u8>,
    /// Leases a `recover_claim` left behind while they still held their
    /// item: their claimer never learns of them, so no handler runs.
    pub abandoned: BTreeSet<(u8, Token)>,
    /// What broke.
    pub broken: BTreeSet<Broken>,
}

/// The whole model state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct State {
    /// The store's clock.
    pub now: u8,
    /// The store's items.
    pub items: Vec<Item>,
    /// The store's finishing traces ([`crate::Protocol::Fixed`]), by
    /// (item, token): each lease whose own call finished it.
    pub traces: BTreeSet<(u8, Token)>,
    /// The store's takeover traces ([`crate::Protocol::Takeovers`]): each
    /// (item, token) a reap took and no claim has leased again since.
    pub takeovers: BTreeSet<(u8, Token)>,
    /// The workers.
    pub workers: Vec<Worker>,
    /// What each two-step reaper has read and not yet requeued.
    pub reapers: Vec<Option<Vec<(u8, Token)>>>,
    /// Replies the network may still drop.
    pub lost_left: u8,
    /// Crashes still allowed.
    pub crashes_left: u8,
    /// History for the properties.
    pub ghost: Ghost,
}
