//! The open defects of today's protocol, found by the checker as shortest
//! traces at the CI bounds, and gone on the fixed protocol; the takeover
//! protocol's reading of a trace's time, and the misreport without it.

use leaseq_model_check::{
    check, check_all, Bounds, Broken, Faults, LeaseModel, Protocol, Slot, ACK_AFTER_LOSS,
    DEAD_AFTER_REAP, NO_DEAD_WITHOUT_RUN, SAFETY, TRUE_OUTCOMES,
};

/// Runs `path` and returns the state it ends in.
fn end_of(model: &LeaseModel, path: &[leaseq_model_check::Action]) -> leaseq_model_check::State {
    path.iter().fold(model.initial(), |s, &a| {
        model
            .step(&s, a)
            .expect("every step of a path is enabled")
            .0
    })
}

#[test]
fn today_reports_a_landed_ack_as_lost() {
    let model = LeaseModel::new(Protocol::Today, Bounds::ci());
    let run = check(&model, TRUE_OUTCOMES);
    let path = run.discovery.expect("today's protocol misreports an ack");
    let trace = model.trace(&path);
    eprintln!("{trace}");
    // Claim, two clock steps to the expiry, the handler, the ack whose
    // reply is lost, lease_fate: nothing shorter shows it.
    assert_eq!(path.len(), 6, "{trace}");
    assert!(
        trace.contains("ack(item 0 w0#0.0 held_until t=2) -> Ok, reply LOST"),
        "{trace}"
    );
    assert!(
        trace.contains("-> Lost => reports item 0 (w0#0.0) LeaseLost"),
        "{trace}"
    );
    let end = end_of(&model, &path);
    assert_eq!(end.items[0].slot, Slot::Acked, "the ack landed");
    assert!(end.ghost.broken.contains(&Broken::Misreport));
}

#[test]
fn today_sends_an_item_dead_that_never_ran() {
    let model = LeaseModel::new(Protocol::Today, Bounds::ci());
    let run = check(&model, NO_DEAD_WITHOUT_RUN);
    let path = run
        .discovery
        .expect("today's protocol abandons an expired claim");
    let trace = model.trace(&path);
    eprintln!("{trace}");
    // The claim whose reply is lost, two clock steps, recover_claim
    // finding nothing live, the reap.
    assert_eq!(path.len(), 5, "{trace}");
    assert!(trace.contains("recover_claim(spec w0#0) -> []"), "{trace}");
    assert!(trace.contains("reap -> requeued 0, dead 1"), "{trace}");
    let end = end_of(&model, &path);
    assert_eq!(end.items[0].slot, Slot::Dead);
    assert_eq!(end.items[0].attempts, 1, "its only attempt was spent");
}

#[test]
fn today_breaks_only_those_two_properties() {
    let model = LeaseModel::new(Protocol::Today, Bounds::ci());
    let (run, found) = check_all(&model);
    let broken: Vec<&str> = found
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| SAFETY.contains(name))
        .collect();
    let mut want = vec![NO_DEAD_WITHOUT_RUN, TRUE_OUTCOMES];
    want.sort();
    assert_eq!(broken, want, "{} states", run.states);
}

#[test]
fn fixed_protocol_keeps_every_property() {
    let model = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    let (run, found) = check_all(&model);
    eprintln!(
        "Fixed at CI bounds: {} states, depth {}, {:?}",
        run.states, run.depth, run.elapsed
    );
    for (name, path) in &found {
        assert!(
            !SAFETY.contains(name),
            "{name} broken on the fixed protocol:\n{}",
            model.trace(path)
        );
    }
    // Not vacuous: replies are lost and settled, and reaps send items Dead.
    let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
    assert!(names.contains(&ACK_AFTER_LOSS), "{names:?}");
    assert!(names.contains(&DEAD_AFTER_REAP), "{names:?}");
    assert!(run.states > 10_000, "{} states", run.states);
}

#[test]
fn fixed_recover_claim_renews_the_expired_lease() {
    // The Dead-without-run path on the fixed protocol: recover_claim hands
    // the expired lease back renewed, and the handler can run.
    let today = LeaseModel::new(Protocol::Today, Bounds::ci());
    let path = check(&today, NO_DEAD_WITHOUT_RUN)
        .discovery
        .expect("a counterexample");
    let fixed = LeaseModel::new(Protocol::Fixed, Bounds::ci());
    let recover = &path[..4];
    let trace = fixed.trace(recover);
    assert!(
        trace.contains("recover_claim(spec w0#0) -> [item 0 w0#0.0 expires t=4]"),
        "{trace}"
    );
    // The reap that followed has nothing to take.
    assert!(fixed.step(&end_of(&fixed, recover), path[4]).is_none());
}

#[test]
fn a_claim_sent_again_can_lease_an_item_under_its_first_token_anew() {
    use leaseq_model_check::Action::{Claim, Reap, Recover, Tick};
    // The claim's reply is lost, a reaper takes the lease before
    // recover_claim asks, and the same claim sent again leases the item
    // under the same token: a second lease, whose reap is its first.
    let bounds = Bounds {
        max_attempts: vec![2],
        workers: 1,
        max_time: 4,
        ..Bounds::ci()
    };
    let model = LeaseModel::new(Protocol::Fixed, bounds);
    let path = [
        Claim {
            worker: 0,
            lost: true,
        },
        Tick,
        Tick,
        Reap { reaper: 0 },
        Recover { worker: 0 },
        Claim {
            worker: 0,
            lost: false,
        },
        Tick,
        Tick,
        Reap { reaper: 0 },
    ];
    let trace = model.trace(&path);
    assert!(
        trace.contains("claim(spec w0#0) again -> [item 0 w0#0.0 expires t=4]"),
        "{trace}"
    );
    let end = end_of(&model, &path);
    assert_eq!(end.items[0].slot, Slot::Dead, "{trace}");
    assert!(end.ghost.broken.is_empty(), "{trace}");
}

#[test]
fn takeovers_keeps_every_property_at_ci_bounds() {
    let model = LeaseModel::new(Protocol::Takeovers, Bounds::ci());
    let (run, found) = check_all(&model);
    eprintln!(
        "Takeovers at CI bounds: {} states, depth {}, {:?}",
        run.states, run.depth, run.elapsed
    );
    for (name, path) in &found {
        assert!(
            !SAFETY.contains(name),
            "{name} broken on the takeover protocol:\n{}",
            model.trace(path)
        );
    }
    let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
    assert!(names.contains(&ACK_AFTER_LOSS), "{names:?}");
    assert!(names.contains(&DEAD_AFTER_REAP), "{names:?}");
    assert!(run.states > 10_000, "{} states", run.states);
}

#[test]
fn takeovers_answers_truly_when_a_claim_sent_again_reuses_a_reaped_token() {
    // With two lost replies: a claim's reply is lost, a reaper takes its
    // lease (a takeover trace of item 1 under w1#0.0), the same claim
    // sent again leases item 1 under w1#0.0 anew, dropping that trace, and
    // that lease's ack lands with its reply lost. Past its held_until,
    // lease_fate finds no trace: Finished. The whole space keeps the
    // property.
    let model = LeaseModel::new(Protocol::Takeovers, Bounds::two_losses());
    let run = check(&model, TRUE_OUTCOMES);
    eprintln!(
        "Takeovers at two-losses bounds: {} states, depth {}, {:?}",
        run.states, run.depth, run.elapsed
    );
    if let Some(path) = &run.discovery {
        panic!("the takeover protocol misreports:\n{}", model.trace(path));
    }
    assert!(run.states > 1_000_000, "{} states", run.states);
}

#[test]
fn a_claim_that_keeps_the_takeover_trace_reports_a_landed_ack_lost() {
    // The first takeover protocol (the seeded fault): the trace of the
    // first lease under w1#0.0 answers Lost for the second lease's ack.
    let faults = Faults {
        claim_keeps_takeover_trace: true,
        ..Faults::default()
    };
    let model = LeaseModel::new(Protocol::Takeovers, Bounds::two_losses()).faults(faults);
    let run = check(&model, TRUE_OUTCOMES);
    let path = run
        .discovery
        .expect("a claim that keeps the takeover trace misreports this ack");
    let trace = model.trace(&path);
    eprintln!("{} states, {:?}\n{trace}", run.states, run.elapsed);
    assert_eq!(path.len(), 12, "{trace}");
    assert!(trace.contains("reap -> requeued 1"), "{trace}");
    assert!(
        trace.contains("claim(spec w1#0) again -> [item 1 w1#0.0 expires t=4]"),
        "{trace}"
    );
    assert!(
        trace.contains("ack(item 1 w1#0.0 held_until t=4) -> Ok, reply LOST"),
        "{trace}"
    );
    assert!(
        trace.contains("-> Lost => reports item 1 (w1#0.0) LeaseLost"),
        "{trace}"
    );
    let end = end_of(&model, &path);
    assert_eq!(end.items[1].slot, Slot::Acked, "the ack landed");
    // The takeover protocol reads the trace's time, the fixed protocol its
    // finishing trace: both tell this ack apart.
    for protocol in [Protocol::Takeovers, Protocol::Fixed] {
        let truly = LeaseModel::new(protocol, Bounds::two_losses());
        let trace = truly.trace(&path);
        assert!(
            trace.contains("-> Finished => reports item 1 (w1#0.0) acked"),
            "{protocol:?}:\n{trace}"
        );
        assert!(end_of(&truly, &path).ghost.broken.is_empty(), "{trace}");
    }
}
