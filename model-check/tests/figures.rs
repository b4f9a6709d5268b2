//! The figures of docs/model.md: states and time per property at the CI
//! bounds and at the larger bounds, and each seeded fault's counterexample
//! length and time to find. Behind `LEASEQ_MODEL_BIG=1` (minutes); CI
//! runs the same checks at its bounds in the other tests.

use std::fmt::{Debug, Write};
use std::hash::Hash;

use leaseq_model_check::{
    check, seeded, Bounds, Focus, IdBounds, IdFaults, IdModel, LeaseModel, ListingBounds,
    ListingFaults, ListingModel, Protocol, Run, IDS_UNIQUE, NEVER_HIDDEN, NO_PHANTOM, SAFETY,
    TRUE_OUTCOMES,
};

fn big() -> bool {
    std::env::var("LEASEQ_MODEL_BIG").is_ok_and(|v| v == "1")
}

fn verdict<A>(run: &Run<A>) -> String {
    match run.discovery_len() {
        None => "holds".to_string(),
        Some(n) => format!("counterexample, {n} steps"),
    }
}

/// One row of the properties table, printed as it is measured.
fn row<M>(table: &mut String, bounds: &str, protocol: &str, model: &M, property: &'static str)
where
    M: Focus,
    M::State: Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    let run = check(model, property);
    let _ = writeln!(
        table,
        "| {bounds} | {protocol} | {property} | {} | {:.2?} | {} |",
        run.states,
        run.elapsed,
        verdict(&run)
    );
    eprintln!("{}", table.lines().last().unwrap_or_default());
}

/// One row of the faults table: the fault must be found.
fn fault<M>(table: &mut String, bounds: &str, name: &str, model: &M, property: &'static str)
where
    M: Focus,
    M::State: Hash + Send + Sync + Clone + PartialEq + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    let run = check(model, property);
    let steps = run
        .discovery_len()
        .unwrap_or_else(|| panic!("{name}: not found"));
    let _ = writeln!(
        table,
        "| {bounds} | {name} | {property} | {steps} | {} | {:.2?} |",
        run.states, run.elapsed
    );
    eprintln!("{}", table.lines().last().unwrap_or_default());
}

#[test]
fn figures() {
    if !big() {
        eprintln!("figures: set LEASEQ_MODEL_BIG=1 to measure them");
        return;
    }
    let mut table = String::from(
        "| bounds | protocol | property | states | time | result |\n|---|---|---|---:|---:|---|\n",
    );
    for (name, bounds) in [("CI", Bounds::ci()), ("big", Bounds::big())] {
        for protocol in [Protocol::Today, Protocol::Fixed, Protocol::Takeovers] {
            let model = LeaseModel::new(protocol, bounds.clone());
            for property in SAFETY {
                row(&mut table, name, &format!("{protocol:?}"), &model, property);
            }
        }
    }
    for protocol in [Protocol::Fixed, Protocol::Takeovers] {
        let model = LeaseModel::new(protocol, Bounds::two_losses());
        let p = format!("{protocol:?}");
        row(&mut table, "two losses", &p, &model, TRUE_OUTCOMES);
    }
    for (name, bounds) in [("CI", IdBounds::ci()), ("big", IdBounds::big())] {
        let model = IdModel::new(bounds);
        row(&mut table, name, "delete", &model, IDS_UNIQUE);
    }
    for (name, bounds) in [("CI", ListingBounds::ci()), ("big", ListingBounds::big())] {
        let model = ListingModel::new(bounds);
        for property in [NEVER_HIDDEN, NO_PHANTOM] {
            row(&mut table, name, "listing", &model, property);
        }
    }
    let _ = writeln!(
        table,
        "\n| bounds | defect or fault | property | steps | states | time |\n|---|---|---|---:|---:|---:|"
    );
    for (name, bounds) in [("CI", Bounds::ci()), ("big", Bounds::big())] {
        for s in seeded(&bounds) {
            fault(&mut table, name, s.name, &s.model, s.property);
        }
    }
    let no_floor = IdFaults {
        delete_without_floor: true,
        ..IdFaults::default()
    };
    let no_generation = IdFaults {
        enqueue_without_generation: true,
        ..IdFaults::default()
    };
    let listing_fault = ListingFaults {
        without_generation: true,
    };
    for (name, ids, listing) in [
        ("CI", IdBounds::ci(), ListingBounds::ci()),
        ("big", IdBounds::big(), ListingBounds::big()),
    ] {
        let delete = |f: IdFaults| IdModel::new(ids.clone()).faults(f);
        fault(
            &mut table,
            name,
            "a delete without the id floor",
            &delete(no_floor),
            IDS_UNIQUE,
        );
        fault(
            &mut table,
            name,
            "an enqueue that ignores the generation (ids)",
            &delete(no_generation),
            IDS_UNIQUE,
        );
        let model = ListingModel::new(listing).faults(listing_fault);
        fault(
            &mut table,
            name,
            "a listing without the generation",
            &model,
            NEVER_HIDDEN,
        );
    }
    let one = IdModel::new(IdBounds::one_handle()).faults(no_floor);
    let name = "a delete without the id floor, one handle that restarts";
    fault(&mut table, "one handle", name, &one, IDS_UNIQUE);
    println!("{table}");
}
