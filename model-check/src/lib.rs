//! An exhaustive model of leaseq's lease protocol, checked with
//! [`stateright`]: a store with the contract's states and token fence, a
//! clock that passes a lease's expiry at any point, workers that claim,
//! run, extend, ack, release, fail and crash, reapers, and a network that
//! drops replies, after which the worker settles the call as
//! `leaseq_core::settle` does (`recover_claim` after a lost claim reply,
//! `lease_fate` after a lost finishing reply).
//!
//! Every interleaving is explored for small bounds ([`Bounds`]), breadth
//! first, so a counterexample is a shortest one. [`LeaseModel::trace`]
//! prints it one `Backend` call per line, and [`replay_on_memory`],
//! [`replay_on_redis`] and [`replay_on_sqlite`] run it against the code.
//!
//! Two smaller models check the Redis protocols of several scripts:
//! [`IdModel`], `delete_queue` and its id floor (ids never reused across
//! delete and restart), and [`ListingModel`], the queue listing and its
//! generation counter (no queue that holds items hidden, no phantom kept).
//!
//! ```
//! use leaseq_model_check::{check, Bounds, LeaseModel, Protocol, TRUE_OUTCOMES};
//!
//! // Today's protocol reports a landed ack as lost when its reply is
//! // dropped and the lease's expiry passes before `lease_fate` is asked.
//! let today = LeaseModel::new(Protocol::Today, Bounds::tiny());
//! let run = check(&today, TRUE_OUTCOMES);
//! let path = run.discovery.expect("a counterexample");
//! assert!(today.trace(&path).contains("reports item 0 (w0#0.0) LeaseLost"));
//!
//! // With the finishing trace and the renewing recover_claim: none.
//! let fixed = LeaseModel::new(Protocol::Fixed, Bounds::tiny());
//! assert!(check(&fixed, TRUE_OUTCOMES).discovery.is_none());
//! ```

mod check;
mod config;
mod ids;
mod listing;
mod model;
mod replay;
mod state;
mod suite;
mod trace;

pub use check::{check, check_all, Discoveries, Focus, Run};
pub use config::{Bounds, Faults, Protocol};
pub use ids::{
    Call, Deleting, Handle, IdAction, IdBounds, IdFaults, IdModel, IdReply, IdState, Registration,
    ENQUEUE_AFTER_DELETE, FLOOR_RAISED_AGAIN, IDS_UNIQUE,
};
pub use listing::{
    Enqueuing, Listing, ListingAction, ListingBounds, ListingFaults, ListingModel, ListingState,
    NEVER_HIDDEN, NO_PHANTOM, REGISTRATION_REFUSED,
};
pub use model::{
    Action, Fate, LeaseModel, Reply, Step, ACK_AFTER_LOSS, ACK_ONCE, DEAD_AFTER_REAP, NOTHING_LOST,
    NO_DEAD_WITHOUT_RUN, ONE_LIVE_LEASE, REAPED_ONCE, SAFETY, TRUE_OUTCOMES,
};
pub use replay::{replay_on_memory, replay_on_redis, replay_on_sqlite, Replayed, REAL_STEP, STEP};
pub use state::{
    Broken, End, Family, Fin, Ghost, Held, Item, Outcome, Phase, Probe, Slot, State, Token, Worker,
};
pub use suite::{seeded, Seeded};
