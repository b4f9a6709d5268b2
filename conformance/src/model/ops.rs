//! The operations a model-based run draws, and how long "short" and "long"
//! are on each kind of clock.

use leaseq_core::ItemState;
use proptest::prelude::*;

/// A length of time, mapped to milliseconds by [`Timing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Span {
    /// Around a tenth of a second on a manual clock.
    Short,
    /// Around a second on a manual clock.
    Medium,
    /// Ten minutes and more: never runs out within a case on a real clock.
    Long,
}

/// One item of an enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemSpec {
    /// Payload bytes (arbitrary, empty allowed).
    pub payload: Vec<u8>,
    /// Priority, from a small range so ties are common.
    pub priority: i32,
    /// Delay, if any.
    pub delay: Option<Span>,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Dedup key `k0` … `k3`, if any.
    pub dedup: Option<u8>,
}

/// A fenced call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `ack`.
    Ack,
    /// `extend` by the span.
    Extend(Span),
    /// `release` after the delay.
    Release(Option<Span>),
    /// `fail`; `true` for a reason longer than the limit (it is cut).
    Fail(bool),
    /// `give_back`: Ready again without spending the attempt.
    GiveBack,
    /// `snooze` for the delay (Control group).
    Snooze(Option<Span>),
    /// `complete` with a result (History group): an ack that records it.
    Complete,
}

/// One step of a run. Leases are picked by index (modulo the number of
/// leases handed out so far, current and stale alike), so a sequence stays
/// meaningful while it shrinks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `enqueue` of a batch.
    Enqueue(Vec<ItemSpec>),
    /// `claim` of up to `max`, leased for the span.
    Claim {
        /// The most to claim.
        max: u32,
        /// The lease length.
        ttl: Span,
    },
    /// A fenced call with the token a claim handed out (often stale by now).
    Fenced {
        /// Which lease.
        pick: u16,
        /// What to do with it.
        verb: Verb,
    },
    /// A fenced call on a known item with a token nobody was given.
    Forged {
        /// Which lease's item.
        pick: u16,
        /// What to do with it.
        verb: Verb,
    },
    /// `lease_fate` of a lease a claim handed out (`forge`: with a token
    /// nobody was given), asked with a `held_until` an hour ahead of the
    /// backend's now (`ahead`) or at the last reading of it.
    Fate {
        /// Which lease.
        pick: u16,
        /// Forge the token.
        forge: bool,
        /// Ask with a `held_until` still ahead.
        ahead: bool,
    },
    /// `recover_claim` of the spec of a claim made before (picked modulo).
    Recover(u16),
    /// `ack_many` of the picked leases, in order (a pick may repeat);
    /// `true` forges that slot's token.
    AckMany(Vec<(u16, bool)>),
    /// `reap`.
    Reap,
    /// Let time pass (manual clocks only; skipped on a real clock).
    Advance(Span),
    /// The `expire_leases` hook: every lease runs out now.
    ExpireLeases,
    /// The `make_due` hook: every Scheduled item is due now.
    MakeDue,
    /// `stats`.
    Stats,
    /// `peek(state, limit)`.
    Peek(ItemState, u8),
    /// `redrive(limit)`.
    Redrive(u8),
    /// `redrive_item` of an id picked (modulo) from every id the queue
    /// handed out, live or gone.
    RedriveItem(u16),
    /// `remove_item` of an id picked (modulo) from every id the queue
    /// handed out, live or gone (on backends that have it).
    RemoveItem(u16),
    /// `purge`.
    Purge,
    /// `cancel` of an id picked (modulo) from every id the queue handed
    /// out, live or gone (Control group).
    Cancel(u16),
    /// `pause` (`true`) or `resume` (Control group).
    Pause(bool),
    /// `run_now` of an id picked as for [`Op::Cancel`] (Control group).
    RunNow(u16),
    /// `finished` of every kept item (History group).
    Finished,
}

/// Milliseconds for each [`Span`] on one kind of clock.
///
/// On a manual clock every deadline (lease, delay) is an odd number of ms
/// from "now", and the clock moves by even steps only (after a hook too), so
/// no deadline ever falls exactly on "now": the model never depends on
/// whether a backend counts that instant as passed. On a real clock leases
/// and delays are at least ten minutes, so they run out only through the
/// test hooks; the model's verdict never depends on how fast the run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// The backend reads a clock the driver moves.
    Manual,
    /// The backend reads a real clock.
    Real,
}

impl Timing {
    /// A lease length.
    pub fn ttl_ms(self, s: Span) -> u64 {
        match (self, s) {
            (Timing::Manual, Span::Short) => 101,
            (Timing::Manual, Span::Medium) => 1_001,
            (Timing::Manual, Span::Long) => 600_001,
            (Timing::Real, Span::Short) => 600_001,
            (Timing::Real, Span::Medium) => 900_001,
            (Timing::Real, Span::Long) => 1_200_001,
        }
    }

    /// A delay (enqueue or release).
    pub fn delay_ms(self, s: Option<Span>) -> u64 {
        match s {
            None => 0,
            Some(s) => self.ttl_ms(s) + if self == Timing::Real { 3_000_000 } else { 0 },
        }
    }

    /// How far [`Op::Advance`] moves a manual clock (even, see above).
    pub fn advance_ms(s: Span) -> u64 {
        match s {
            Span::Short => 100,
            Span::Medium => 1_000,
            Span::Long => 600_000,
        }
    }
}

fn span() -> impl Strategy<Value = Span> {
    prop_oneof![Just(Span::Short), Just(Span::Medium), Just(Span::Long)]
}

fn item() -> impl Strategy<Value = ItemSpec> {
    (
        prop::collection::vec(any::<u8>(), 0..6),
        -1i32..=2,
        prop::option::weighted(0.25, span()),
        1u32..=3,
        prop::option::weighted(0.3, 0u8..4),
    )
        .prop_map(|(payload, priority, delay, max_attempts, dedup)| ItemSpec {
            payload,
            priority,
            delay,
            max_attempts,
            dedup,
        })
}

fn verb() -> impl Strategy<Value = Verb> {
    prop_oneof![
        5 => Just(Verb::Ack),
        2 => span().prop_map(Verb::Extend),
        3 => prop::option::weighted(0.4, span()).prop_map(Verb::Release),
        1 => any::<bool>().prop_map(Verb::Fail),
        1 => Just(Verb::GiveBack),
        1 => prop::option::weighted(0.6, span()).prop_map(Verb::Snooze),
        2 => Just(Verb::Complete),
    ]
}

fn state() -> impl Strategy<Value = ItemState> {
    prop::sample::select(ItemState::ALL.to_vec())
}

/// One operation, weighted so queues fill, drain and churn.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => prop::collection::vec(item(), 1..4).prop_map(Op::Enqueue),
        12 => (prop_oneof![8 => 1u32..5, 1 => Just(1_000u32)], span())
            .prop_map(|(max, ttl)| Op::Claim { max, ttl }),
        16 => (any::<u16>(), verb()).prop_map(|(pick, verb)| Op::Fenced { pick, verb }),
        1 => (any::<u16>(), verb()).prop_map(|(pick, verb)| Op::Forged { pick, verb }),
        2 => (any::<u16>(), prop::bool::weighted(0.2), any::<bool>())
            .prop_map(|(pick, forge, ahead)| Op::Fate { pick, forge, ahead }),
        2 => any::<u16>().prop_map(Op::Recover),
        4 => prop::collection::vec((any::<u16>(), prop::bool::weighted(0.1)), 1..6)
            .prop_map(Op::AckMany),
        5 => Just(Op::Reap),
        4 => span().prop_map(Op::Advance),
        3 => Just(Op::ExpireLeases),
        1 => Just(Op::MakeDue),
        1 => Just(Op::Stats),
        2 => (state(), 0u8..6).prop_map(|(s, n)| Op::Peek(s, n)),
        2 => (0u8..4).prop_map(Op::Redrive),
        2 => any::<u16>().prop_map(Op::RedriveItem),
        2 => any::<u16>().prop_map(Op::RemoveItem),
        1 => Just(Op::Purge),
        2 => any::<u16>().prop_map(Op::Cancel),
        1 => any::<bool>().prop_map(Op::Pause),
        1 => any::<u16>().prop_map(Op::RunNow),
        1 => Just(Op::Finished),
    ]
}

/// A sequence of 1 to `max_steps` operations.
pub fn ops(max_steps: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..=max_steps.max(1))
}
