//! What a check covers: the protocol variant, the seeded faults and the
//! bounds of the configuration.

/// Which lease protocol the store and the worker's settle steps follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The protocol as the code has it today: `lease_fate` answers `Lost`
    /// for a token that no longer holds its item once `held_until` has
    /// passed, and `recover_claim` returns only the claim's live leases.
    Today,
    /// With both fixes: the finishing call (ack, release, fail) leaves a
    /// bounded trace of its token, so `lease_fate` answers "you finished
    /// it"; and `recover_claim` also returns the claim's leases that
    /// expired but were not yet reaped, renewed.
    Fixed,
    /// The fix as PostgreSQL and SQLite make it (`LeaseTraces::Takeovers`):
    /// the reap leaves a trace of each (item, token) it takes, finishing
    /// calls leave none, and a claim that leases an item under a token
    /// drops that pair's trace (the same claim sent again reuses its
    /// tokens, see `ClaimSpec::duplicate`); past `held_until`,
    /// `lease_fate` answers `Lost` for a token with a trace and `Finished`
    /// for any other. `recover_claim` renews as in [`Protocol::Fixed`].
    Takeovers,
}

/// Faults seeded into a protocol: each breaks a property, and the tests
/// prove the checker finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Faults {
    /// The reaper reads the expired leases in one step and requeues the
    /// items it read in a second step, checking only that each is still
    /// Leased (not by whom): two reapers requeue one item twice.
    pub two_step_reaper: bool,
    /// `lease_fate` keeps no finishing trace, whatever the protocol.
    pub fate_without_trace: bool,
    /// The reap leaves no takeover trace ([`Protocol::Takeovers`]): past
    /// `held_until` every lease that lost its item reads as finished.
    pub reap_without_trace: bool,
    /// A claim of [`Protocol::Takeovers`] leaves the takeover trace of the
    /// (item, token) it leases (the first takeover protocol): the trace of
    /// an earlier lease under the same token, reaped before the same claim
    /// sent again leased the item anew, answers `Lost` for the new lease's
    /// landed ack.
    pub claim_keeps_takeover_trace: bool,
}

/// The size of the configuration the checker explores exhaustively.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bounds {
    /// `max_attempts` of each item, one entry per item (all enqueued Ready
    /// at the start).
    pub max_attempts: Vec<u8>,
    /// Workers.
    pub workers: u8,
    /// Reapers.
    pub reapers: u8,
    /// Claims each worker makes at most (a claim sent again after a lost
    /// reply is the same claim and does not count).
    pub claims_per_worker: u8,
    /// Items one claim leases at most.
    pub claim_max: u8,
    /// A lease's length in clock steps.
    pub lease_steps: u8,
    /// The store's clock stops at this step.
    pub max_time: u8,
    /// Replies the network may drop, in total.
    pub lost_replies: u8,
    /// Worker crashes, in total.
    pub crashes: u8,
}

impl Bounds {
    /// The smallest configuration that shows both open defects: one item
    /// on its last attempt, one worker, one reaper, one lost reply, no
    /// crash. Checked in well under a second.
    pub fn tiny() -> Self {
        Bounds {
            max_attempts: vec![1],
            workers: 1,
            reapers: 1,
            claims_per_worker: 1,
            claim_max: 1,
            lease_steps: 2,
            max_time: 3,
            lost_replies: 1,
            crashes: 0,
        }
    }

    /// The bounds CI checks: 2 items (one on its last attempt, one with a
    /// retry), 3 workers of up to 2 claims each, 2 reapers, 1 lost reply,
    /// 1 crash, a lease of 2 clock steps and a clock that stops at 3.
    pub fn ci() -> Self {
        Bounds {
            max_attempts: vec![1, 2],
            workers: 3,
            reapers: 2,
            claims_per_worker: 2,
            claim_max: 1,
            lease_steps: 2,
            max_time: 3,
            lost_replies: 1,
            crashes: 1,
        }
    }

    /// The larger bounds behind `LEASEQ_MODEL_BIG=1`: the CI bounds with
    /// a clock that runs one step longer, so a worker's second lease can
    /// expire too (about 2.5 times the states).
    pub fn big() -> Self {
        Bounds {
            max_time: 4,
            ..Bounds::ci()
        }
    }

    /// Where two reapers race: one item with attempts to spare, 3
    /// workers of one claim each, 2 reapers, nothing lost, no crash. The
    /// bounds for the two-step reaper fault.
    pub fn reaper_race() -> Self {
        Bounds {
            max_attempts: vec![3],
            workers: 3,
            reapers: 2,
            claims_per_worker: 1,
            claim_max: 1,
            lease_steps: 2,
            max_time: 3,
            lost_replies: 0,
            crashes: 0,
        }
    }

    /// The CI bounds with a second lost reply and a clock that stops at
    /// 4: a claim's reply and then an ack's can both be lost, the second
    /// lease's expiry passed. Where [`Protocol::Takeovers`] with the
    /// fault [`Faults::claim_keeps_takeover_trace`] misreports an
    /// ack.
    pub fn two_losses() -> Self {
        Bounds {
            lost_replies: 2,
            max_time: 4,
            ..Bounds::ci()
        }
    }

    /// The number of items.
    pub fn items(&self) -> usize {
        self.max_attempts.len()
    }
}
