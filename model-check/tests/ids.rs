//! The delete protocol and its id floor: ids are never reused across
//! delete and restart, and without the floor (or without the generation
//! that makes a registration read it afresh) the checker finds an id
//! handed out twice.

use leaseq_model_check::{
    check, check_all, IdBounds, IdFaults, IdModel, ENQUEUE_AFTER_DELETE, FLOOR_RAISED_AGAIN,
    IDS_UNIQUE,
};

fn without_floor() -> IdFaults {
    IdFaults {
        delete_without_floor: true,
        ..IdFaults::default()
    }
}

#[test]
fn the_delete_protocol_never_reuses_an_id() {
    let model = IdModel::new(IdBounds::ci());
    let (run, found) = check_all(&model);
    eprintln!(
        "delete protocol at CI bounds: {} states, depth {}, {:?}",
        run.states, run.depth, run.elapsed
    );
    let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
    assert!(!names.contains(&IDS_UNIQUE), "{names:?}");
    // Not vacuous: items are enqueued after a delete, and enqueues racing
    // a delete pass the floor it raised.
    assert!(names.contains(&ENQUEUE_AFTER_DELETE), "{names:?}");
    assert!(names.contains(&FLOOR_RAISED_AGAIN), "{names:?}");
    let again = check(&model, FLOOR_RAISED_AGAIN).discovery.expect("found");
    eprintln!("{}", model.trace(&again));
    assert!(run.states > 1_000, "{} states", run.states);
}

#[test]
fn a_delete_without_the_id_floor_reuses_an_id() {
    let model = IdModel::new(IdBounds::ci()).faults(without_floor());
    let path = check(&model, IDS_UNIQUE)
        .discovery
        .expect("a delete without the floor reuses an id");
    let trace = model.trace(&path);
    eprintln!("{trace}");
    // An item gets id 1, the delete takes the counter with it, and a
    // handle that never saw id 1 registers, reads floor 0, and gets id 1.
    assert_eq!(path.len(), 8, "{trace}");
    assert!(
        trace.contains("queue_delete(floor 0) -> deleted"),
        "{trace}"
    );
    assert!(trace.contains("h1 register -> floor 0"), "{trace}");
    assert!(trace.ends_with("an id REUSED\n"), "{trace}");
    // The protocol with the floor, on the same path, is told it is
    // behind at the delete and goes no further.
    let with_floor = IdModel::new(IdBounds::ci());
    assert!(with_floor.trace(&path).contains("behind (last id 1)"));
}

#[test]
fn a_restart_alone_is_enough_to_reuse_an_id_without_the_floor() {
    // One handle: until it restarts, the highest id it saw keeps it above
    // the deleted queue's ids; after, only the store can.
    let model = IdModel::new(IdBounds::one_handle()).faults(without_floor());
    let path = check(&model, IDS_UNIQUE).discovery.expect("found");
    let trace = model.trace(&path);
    eprintln!("{trace}");
    assert_eq!(path.len(), 9, "{trace}");
    assert!(trace.contains("h0 restarts"), "{trace}");
    assert!(trace.ends_with("an id REUSED\n"), "{trace}");
    let sound = IdModel::new(IdBounds::one_handle());
    assert!(check(&sound, IDS_UNIQUE).discovery.is_none());
}

#[test]
fn an_enqueue_that_ignores_the_generation_reuses_an_id() {
    // The floor is raised, but a registration read before the delete
    // carries the old floor; the generation is what refuses it.
    let model = IdModel::new(IdBounds::ci()).faults(IdFaults {
        enqueue_without_generation: true,
        ..IdFaults::default()
    });
    let path = check(&model, IDS_UNIQUE).discovery.expect("found");
    let trace = model.trace(&path);
    eprintln!("{trace}");
    assert_eq!(path.len(), 11, "{trace}");
    assert!(
        trace.contains("queue_delete(floor 2) -> deleted"),
        "{trace}"
    );
    assert!(
        trace.contains("with registration (generation 0, floor 0) -> id 1"),
        "{trace}"
    );
}
