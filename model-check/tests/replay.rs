//! Counterexamples of today's protocol replayed against the memory
//! backend: every answer the code gives matches the model's, so the
//! defects the model shows are the code's.

use leaseq_core::ItemState;
use leaseq_model_check::{
    check, replay_on_memory, Bounds, LeaseModel, Protocol, NO_DEAD_WITHOUT_RUN, TRUE_OUTCOMES,
};

#[test]
fn misreported_ack_replays_on_the_memory_backend() {
    let model = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&model, TRUE_OUTCOMES).discovery.expect("found");
    let replayed = replay_on_memory(&model, &path).expect("the backend answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    // lease_fate answered Lost, yet the item is gone: the ack landed.
    assert!(replayed
        .lines
        .last()
        .expect("lines")
        .ends_with("lease_fate -> Lost"));
    assert_eq!(replayed.items, vec![None, Some(ItemState::Ready)]);
}

#[test]
fn dead_without_a_run_replays_on_the_memory_backend() {
    let model = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&model, NO_DEAD_WITHOUT_RUN).discovery.expect("found");
    let replayed = replay_on_memory(&model, &path).expect("the backend answers as the model");
    eprintln!("{}", replayed.lines.join("\n"));
    assert!(
        replayed.lines[3].ends_with("recover_claim -> []"),
        "{:?}",
        replayed.lines
    );
    assert_eq!(
        replayed.items,
        vec![Some(ItemState::Dead), Some(ItemState::Ready)]
    );
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
