//! The defects and seeded faults the checker must find, each with the
//! model and property that shows it: shared by the tests and the figures.

use crate::config::{Bounds, Faults, Protocol};
use crate::model::{LeaseModel, NO_DEAD_WITHOUT_RUN, ONE_LIVE_LEASE, REAPED_ONCE, TRUE_OUTCOMES};

/// A protocol defect or seeded fault, and where it shows.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// What it is.
    pub name: &'static str,
    /// The model that has it.
    pub model: LeaseModel,
    /// The property it breaks.
    pub property: &'static str,
}

/// The two open defects of [`Protocol::Today`] and the seeded faults, at
/// `bounds` (the two-step reaper at [`Bounds::reaper_race`], where an
/// item has attempts to spare; the claim that keeps the takeover trace
/// at [`Bounds::two_losses`], the fewest lost replies that show it).
pub fn seeded(bounds: &Bounds) -> Vec<Seeded> {
    let today = LeaseModel::new(Protocol::Today, bounds.clone());
    let fixed =
        |faults: Faults, bounds: Bounds| LeaseModel::new(Protocol::Fixed, bounds).faults(faults);
    let two_step = Faults {
        two_step_reaper: true,
        ..Faults::default()
    };
    let no_trace = Faults {
        fate_without_trace: true,
        ..Faults::default()
    };
    let no_takeover = Faults {
        reap_without_trace: true,
        ..Faults::default()
    };
    let any_time = Faults {
        claim_keeps_takeover_trace: true,
        ..Faults::default()
    };
    vec![
        Seeded {
            name: "Today: a landed ack reported LeaseLost",
            model: today.clone(),
            property: TRUE_OUTCOMES,
        },
        Seeded {
            name: "Today: Dead without a run",
            model: today,
            property: NO_DEAD_WITHOUT_RUN,
        },
        Seeded {
            name: "two-step reaper: one lease recovered twice",
            model: fixed(two_step, Bounds::reaper_race()),
            property: REAPED_ONCE,
        },
        Seeded {
            name: "two-step reaper: two live leases",
            model: fixed(two_step, Bounds::reaper_race()),
            property: ONE_LIVE_LEASE,
        },
        Seeded {
            name: "lease_fate without a finishing trace",
            model: fixed(no_trace, bounds.clone()),
            property: TRUE_OUTCOMES,
        },
        Seeded {
            name: "Takeovers: reap leaves no takeover trace",
            model: LeaseModel::new(Protocol::Takeovers, bounds.clone()).faults(no_takeover),
            property: TRUE_OUTCOMES,
        },
        Seeded {
            name: "Takeovers: a claim that keeps the takeover trace",
            model: LeaseModel::new(Protocol::Takeovers, Bounds::two_losses()).faults(any_time),
            property: TRUE_OUTCOMES,
        },
    ]
}
