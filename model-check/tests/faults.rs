//! Seeded protocol faults: the checker finds each, as a shortest trace.

use leaseq_model_check::{
    check, seeded, Bounds, Faults, LeaseModel, Protocol, ONE_LIVE_LEASE, REAPED_ONCE, TRUE_OUTCOMES,
};

fn find(name: &str) -> (LeaseModel, &'static str) {
    let s = seeded(&Bounds::ci())
        .into_iter()
        .find(|s| s.name.starts_with(name))
        .expect("a seeded fault of that name");
    (s.model, s.property)
}

#[test]
fn every_seeded_fault_is_found() {
    for s in seeded(&Bounds::ci()) {
        let run = check(&s.model, s.property);
        let path = run
            .discovery
            .unwrap_or_else(|| panic!("{}: not found in {} states", s.name, run.states));
        eprintln!(
            "{}: {} steps, {} states, {:?}\n{}",
            s.name,
            path.len(),
            run.states,
            run.elapsed,
            s.model.trace(&path)
        );
    }
}

#[test]
fn two_step_reaper_requeues_a_live_lease() {
    let (model, property) = find("two-step reaper: two live");
    assert_eq!(property, ONE_LIVE_LEASE);
    let path = check(&model, property).discovery.expect("found");
    let trace = model.trace(&path);
    // Claim, expiry, the handler, the reaper reads the expired lease, the
    // worker releases it, another claims it, the reaper requeues that live
    // lease, a third worker claims it: one reaper is enough.
    assert_eq!(path.len(), 9, "{trace}");
    assert_eq!(trace.matches("reap (read step)").count(), 1, "{trace}");
    assert!(
        trace.contains("reap (requeue step) -> requeued 1"),
        "{trace}"
    );
    assert!(
        trace.contains("w2    claim(spec w2#0) -> [item 0 w2#0.0 expires t=4]"),
        "{trace}"
    );
    // The atomic reaper at the same bounds keeps both properties.
    let atomic = LeaseModel::new(Protocol::Fixed, Bounds::reaper_race());
    for p in [ONE_LIVE_LEASE, REAPED_ONCE] {
        let run = check(&atomic, p);
        assert!(run.discovery.is_none(), "{p}");
        assert!(run.states > 50, "{} states", run.states);
    }
}

#[test]
fn two_step_reaper_recovers_one_lease_twice() {
    let (model, property) = find("two-step reaper: one lease");
    assert_eq!(property, REAPED_ONCE);
    let path = check(&model, property).discovery.expect("found");
    let trace = model.trace(&path);
    assert_eq!(path.len(), 8, "{trace}");
    assert!(trace.ends_with("broken: {DoubleRecovery}\n"), "{trace}");
}

#[test]
fn lease_fate_without_a_trace_misreports() {
    let (model, property) = find("lease_fate without");
    assert_eq!(property, TRUE_OUTCOMES);
    assert_eq!(
        model.faults,
        Faults {
            fate_without_trace: true,
            ..Faults::default()
        }
    );
    let path = check(&model, property).discovery.expect("found");
    let trace = model.trace(&path);
    assert_eq!(path.len(), 6, "{trace}");
    assert!(
        trace.contains("lease_fate(item 0 w0#0.0 held_until t=2) -> Lost"),
        "{trace}"
    );
}

#[test]
fn reap_without_a_takeover_trace_misreports() {
    let (model, property) = find("Takeovers: reap leaves no takeover trace");
    assert_eq!(property, TRUE_OUTCOMES);
    assert_eq!(model.protocol, Protocol::Takeovers);
    let path = check(&model, property).discovery.expect("found");
    let trace = model.trace(&path);
    eprintln!("{trace}");
    // Past held_until a reaped lease reads as finished.
    assert!(trace.contains("reap -> "), "{trace}");
    assert!(trace.contains("-> Finished => reports"), "{trace}");
    assert!(trace.ends_with("broken: {Misreport}\n"), "{trace}");
    // With the trace, the same path is answered truthfully.
    let traced = LeaseModel::new(Protocol::Takeovers, Bounds::ci());
    let end = path
        .iter()
        .try_fold(traced.initial(), |s, &a| traced.step(&s, a).map(|(n, _)| n))
        .expect("the path runs on the traced protocol");
    assert!(end.ghost.broken.is_empty(), "{}", traced.trace(&path));
}
