//! The queue listing with its generation counter: once the racing steps
//! settle, a queue that holds items is listed and an empty one is not;
//! without the generation, the checker finds a queue hidden while it holds
//! items.

use leaseq_model_check::{
    check, check_all, ListingBounds, ListingFaults, ListingModel, NEVER_HIDDEN, NO_PHANTOM,
    REGISTRATION_REFUSED,
};

#[test]
fn the_listing_neither_hides_a_queue_nor_keeps_a_phantom() {
    let model = ListingModel::new(ListingBounds::ci());
    let (run, found) = check_all(&model);
    eprintln!(
        "listing at CI bounds: {} states, depth {}, {:?}",
        run.states, run.depth, run.elapsed
    );
    let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
    assert!(!names.contains(&NEVER_HIDDEN), "{names:?}");
    assert!(!names.contains(&NO_PHANTOM), "{names:?}");
    // Not vacuous: a prune races a registration and the generation refuses
    // it.
    assert!(names.contains(&REGISTRATION_REFUSED), "{names:?}");
    assert!(run.states > 10_000, "{} states", run.states);
}

#[test]
fn a_listing_without_the_generation_hides_a_queue_that_holds_an_item() {
    let model = ListingModel::new(ListingBounds::ci()).faults(ListingFaults {
        without_generation: true,
    });
    let path = check(&model, NEVER_HIDDEN)
        .discovery
        .expect("a listing without the generation hides a queue");
    let trace = model.trace(&path);
    eprintln!("{trace}");
    // A registration made before a prune that found the queue empty lets
    // the item in after it, and the drop then takes the field that names
    // that registration: the item is behind no field, and `listed` is set,
    // so no later enqueue registers again.
    assert_eq!(path.len(), 6, "{trace}");
    assert!(
        trace.contains("enqueue with (T0, generation 0) -> item written"),
        "{trace}"
    );
    assert!(trace.contains("field dropped"), "{trace}");
    assert!(
        trace.ends_with("1 items, registry field none, listed Some(0), generation 1, settled\n"),
        "{trace}"
    );
    // With the generation, the same enqueue is refused.
    let sound = ListingModel::new(ListingBounds::ci());
    assert!(sound
        .trace(&path)
        .contains("enqueue with (T0, generation 0) -> unregistered (generation 1)"));
}
