//! The counterexamples of the old protocol (`Today`), replayed against the
//! memory backend, which follows the fixed protocol: every answer the code
//! gives matches the fixed model's, and the answers that made the defects
//! are gone.

use leaseq_core::ItemState;
use leaseq_model_check::{
    check, replay_on_memory, Bounds, LeaseModel, Protocol, NO_DEAD_WITHOUT_RUN, TRUE_OUTCOMES,
};

#[test]
fn misreported_ack_replays_on_the_memory_backend() {
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, TRUE_OUTCOMES).discovery.expect("found");
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    let replayed = replay_on_memory(&fixed, &path).expect("the backend answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    // The ack landed past the lease's expiry; its trace answers Finished.
    assert!(
        replayed
            .lines
            .last()
            .expect("lines")
            .contains("lease_fate -> Finished"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(replayed.items, vec![None, Some(ItemState::Ready)]);
}

#[test]
fn dead_without_a_run_replays_on_the_memory_backend() {
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, NO_DEAD_WITHOUT_RUN).discovery.expect("found");
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    // Up to the recovery: the reap that followed it finds nothing to take.
    let replayed = replay_on_memory(&fixed, &path[..4]).expect("the backend answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    // The expired, unreaped lease is recovered, not left to a reaper.
    assert!(
        !replayed.lines[3].ends_with("recover_claim -> []"),
        "{:?}",
        replayed.lines
    );
    assert_ne!(replayed.items.first(), Some(&Some(ItemState::Dead)));
}

#[test]
fn a_replay_that_disagrees_is_reported() {
    // The fixed protocol's recover_claim renews an expired lease; the code's
    // does not, and the replay says so (here refused up front: Fixed is
    // not the code's protocol).
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, NO_DEAD_WITHOUT_RUN).discovery.expect("found");
    assert!(replay_on_memory(&fixed, &path).is_err());
}
