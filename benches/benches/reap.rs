//! One reap with 10 expired leases among N live ones, for growing N, on
//! every backend: the cost must not grow with N.
//!
//! `cargo bench -p leaseq-benches --bench reap`

// `criterion_group!` defines a public function without docs.
#![allow(missing_docs)]

use leaseq_core::BackendExt as _;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use leaseq_benches::reap::{one_reap, setup, LIVE};
use leaseq_benches::report::reap_group;
use leaseq_benches::targets::{connect_all, settle};
use leaseq_core::QueueName;

fn settings() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .without_plots()
        .configure_from_args()
}

/// True under `cargo bench`; `cargo test` runs the bench once per case, so
/// it only sets up the smallest queue there.
fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn reap(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let targets = rt.block_on(connect_all(true));
    let live: &[usize] = if benchmarking() { &LIVE } else { &LIVE[..1] };
    let mut group = c.benchmark_group(reap_group());
    group.sampling_mode(SamplingMode::Flat);
    for t in &targets {
        // A server-clock round waits out a 1 ms lease besides the reap, so
        // those rounds are capped by a short target time.
        let (warm, measure) = if t.backend.is_manual() {
            (Duration::from_millis(200), Duration::from_secs(1))
        } else {
            (Duration::from_millis(50), Duration::from_millis(300))
        };
        group.warm_up_time(warm).measurement_time(measure);
        for &n in live {
            let q = QueueName::new(format!("bench-reap-{}-{n}-{}", t.name, std::process::id()))
                .expect("queue name");
            rt.block_on(setup(&t.backend, &q, n))
                .unwrap_or_else(|e| panic!("reap set-up on {} with {n} live: {e}", t.name));
            rt.block_on(settle(t.name))
                .unwrap_or_else(|e| panic!("settling {} after set-up: {e}", t.name));
            group.bench_with_input(BenchmarkId::new(t.name, n), &n, |b, _| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += one_reap(&t.backend, &q)
                                .await
                                .unwrap_or_else(|e| panic!("reap on {}: {e}", t.name));
                        }
                        total
                    })
                })
            });
            rt.block_on(t.backend.backend.admin().expect("admin").purge(&q))
                .unwrap_or_else(|e| panic!("purge on {}: {e}", t.name));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = settings();
    targets = reap
}
criterion_main!(benches);
