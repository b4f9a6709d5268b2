//! Rough single-core throughput of enqueue + claim + ack in batches of 100.
//!
//! `cargo run --release -p leaseq-memory --example throughput [jobs]`

use std::time::{Duration, Instant};

use leaseq_core::{Backend, ClaimSpec, NewItem, QueueName};
use leaseq_memory::MemoryBackend;

fn main() -> leaseq_core::Result<()> {
    let jobs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| leaseq_core::Error::outcome_unknown("runtime", e))?;
    rt.block_on(async {
        let backend = MemoryBackend::new();
        let queue = QueueName::new("bench")?;
        let payload = leaseq_core::Bytes::from_static(b"0123456789abcdef");
        for round in 0..3 {
            let start = Instant::now();
            let mut done = 0;
            while done < jobs {
                let batch = (0..100).map(|_| NewItem::new(payload.clone())).collect();
                backend.enqueue(&queue, batch).await?;
                // One spec per claim: a spec names its claim's tokens.
                let spec = ClaimSpec::new(100, Duration::from_secs(30))?;
                let claimed = backend.claim(&queue, spec).await?;
                for lease in &claimed.leases {
                    backend.ack(&lease.key).await?;
                }
                done += claimed.leases.len();
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "round {round}: {jobs} jobs in {secs:.3}s = {:.0} jobs/s",
                jobs as f64 / secs
            );
        }
        Ok(())
    })
}
