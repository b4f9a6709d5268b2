//! The figures of docs/model.md: states and time per property at the CI
//! bounds and at the larger bounds, and each seeded fault's counterexample
//! length and time to find. Behind `LEASEQ_MODEL_BIG=1` (minutes); CI
//! runs the same checks at its bounds in the other tests.

use std::fmt::Write;

use leaseq_model_check::{check, seeded, Bounds, LeaseModel, Protocol, SAFETY};

fn big() -> bool {
    std::env::var("LEASEQ_MODEL_BIG").is_ok_and(|v| v == "1")
}

fn verdict(run: &leaseq_model_check::Run) -> String {
    match run.discovery_len() {
        None => "holds".to_string(),
        Some(n) => format!("counterexample, {n} steps"),
    }
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
        for protocol in [Protocol::Today, Protocol::Fixed] {
            let model = LeaseModel::new(protocol, bounds.clone());
            for property in SAFETY {
                let run = check(&model, property);
                if protocol == Protocol::Fixed {
                    assert!(
                        run.discovery.is_none(),
                        "{name}: {property} broken on Fixed"
                    );
                }
                let _ = writeln!(
                    table,
                    "| {name} | {protocol:?} | {property} | {} | {:.2?} | {} |",
                    run.states,
                    run.elapsed,
                    verdict(&run)
                );
                eprintln!("{}", table.lines().last().unwrap_or_default());
            }
        }
    }
    let _ = writeln!(
        table,
        "\n| bounds | defect or fault | property | steps | states | time |\n|---|---|---|---:|---:|---:|"
    );
    for (name, bounds) in [("CI", Bounds::ci()), ("big", Bounds::big())] {
        for s in seeded(&bounds) {
            let run = check(&s.model, s.property);
            let steps = run.discovery_len().expect("every seeded fault is found");
            let _ = writeln!(
                table,
                "| {name} | {} | {} | {steps} | {} | {:.2?} |",
                s.name, s.property, run.states, run.elapsed
            );
        }
    }
    println!("{table}");
}
