//! The drain workload through the `Backend` API and through the `Worker`
//! runtime, side by side on every backend: what the runtime costs on top of
//! the backend beneath it. Each iteration enqueues [`JOBS`] jobs (not timed)
//! and drains them with [`CONSUMERS`] consumers and a no-op handler (timed).
//!
//! `cargo bench -p leaseq-benches --bench drain` (filter: `-- drain/redis`
//! or `LEASEQ_BENCH_BACKENDS=memory,postgres`). The load generator's
//! `--drain N --runtime api|worker` runs the same workload at any size.

// `criterion_group!` defines a public function without docs.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leaseq_benches::drain::{self, DrainConfig, Runtime};
use leaseq_benches::targets::connect_all;
use leaseq_core::QueueName;

/// Jobs per drain.
const JOBS: u64 = 2_000;
/// Consumers (API loops or workers) per drain.
const CONSUMERS: usize = 4;

fn settings() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .without_plots()
        .configure_from_args()
}

fn drains(c: &mut Criterion) {
    // The worker spawns tasks: a runtime with threads, as users run it.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let targets = rt.block_on(connect_all(false));
    let mut group = c.benchmark_group("drain");
    group.throughput(Throughput::Elements(JOBS));
    for t in &targets {
        for (runtime, label) in [(Runtime::Api, "api"), (Runtime::Worker, "worker")] {
            let queue = QueueName::new(format!(
                "bench-drain-{}-{label}-{}",
                t.name,
                std::process::id()
            ))
            .expect("queue name");
            let config = DrainConfig {
                jobs: JOBS,
                batch: 100,
                producers: 2,
                consumers: CONSUMERS,
                prefetch: None,
                concurrency: None,
                runtime,
                lease: Duration::from_secs(30),
            };
            group.bench_function(format!("{}/{label}", t.name), |b| {
                b.iter_custom(|iters| {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        let report = rt
                            .block_on(drain::run(
                                t.name,
                                t.backend.backend.clone(),
                                &queue,
                                &config,
                            ))
                            .unwrap_or_else(|e| panic!("drain on {} ({label}): {e}", t.name));
                        spent += Duration::from_secs_f64(report.drain_seconds);
                    }
                    spent
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = settings();
    targets = drains
}
criterion_main!(benches);
