//! Every operation workload against every backend and its baselines, in one
//! run, so each figure has its ratio next to it.
//!
//! `cargo bench -p leaseq-benches --bench ops` (filter: `-- life_100/redis`
//! or `LEASEQ_BENCH_BACKENDS=memory,postgres`).

// `criterion_group!` defines a public function without docs.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leaseq_benches::targets::connect_all;
use leaseq_benches::Workload;
use leaseq_core::QueueName;

fn settings() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .without_plots()
        .configure_from_args()
}

fn queue(w: Workload, who: &str) -> QueueName {
    QueueName::new(format!("bench-{}-{who}-{}", w.name(), std::process::id())).expect("queue name")
}

fn operations(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let targets = rt.block_on(connect_all(false));
    for w in Workload::ALL {
        let mut group = c.benchmark_group(w.name());
        group.throughput(Throughput::Elements(w.elements()));
        for t in &targets {
            let q = queue(w, t.name);
            let backend = t.backend.backend.as_ref();
            group.bench_function(t.name, |b| {
                b.iter_custom(|iters| {
                    rt.block_on(w.run(backend, &q, iters))
                        .unwrap_or_else(|e| panic!("{} on {}: {e}", w.name(), t.name))
                })
            });
            if !w.has_baseline() {
                continue;
            }
            for raw in &t.baselines {
                if raw.batch_only() && w.elements() == 1 {
                    continue;
                }
                let q = q.as_str().to_owned();
                group.bench_function(raw.name(), |b| {
                    b.iter_custom(|iters| {
                        rt.block_on(w.run_baseline(raw.as_ref(), &q, iters))
                            .unwrap_or_else(|e| panic!("{} on {}: {e}", w.name(), raw.name()))
                            .unwrap_or_default()
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = settings();
    targets = operations
}
criterion_main!(benches);
