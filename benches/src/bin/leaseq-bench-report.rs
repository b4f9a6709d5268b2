//! Prints the results tables from criterion's saved estimates.
//!
//! `cargo run -p leaseq-benches --bin leaseq-bench-report [CRITERION_DIR]`

use std::path::PathBuf;

use leaseq_benches::report;

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(report::criterion_dir);
    println!("Operations (median of the samples; ratio = leaseq / baseline throughput):\n");
    println!("{}", report::operations_table(&dir));
    println!(
        "Reap with {} expired leases among N live (median time of one reap):\n",
        leaseq_benches::reap::EXPIRED
    );
    println!("{}", report::reap_table(&dir));
}
