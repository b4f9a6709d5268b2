//! The workloads every backend and every baseline runs, defined once.

use leaseq_core::BackendExt as _;
use std::time::{Duration, Instant};

use bytes::Bytes;
use leaseq_core::limits::MAX_ENQUEUE_BATCH;
use leaseq_core::{Backend, ClaimSpec, Error, Lease, LeaseKey, NewItem, QueueName, Result};

use crate::baseline::Baseline;

/// Items per batch in the batched workloads.
pub const BATCH: usize = 100;
/// Bytes per payload (the size the published comparisons use).
pub const PAYLOAD_BYTES: usize = 16;

/// The payload every workload enqueues.
pub fn payload() -> Bytes {
    Bytes::from_static(b"0123456789abcdef")
}

/// Lease length in the workloads: long enough that nothing expires.
const TTL: Duration = Duration::from_secs(60);

/// One measured operation, the same on every backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// Enqueue one item.
    EnqueueOne,
    /// Enqueue a batch of [`BATCH`] items in one call.
    EnqueueBatch,
    /// Claim one item and ack it (items enqueued beforehand, untimed).
    ClaimAckOne,
    /// Claim [`BATCH`] items in one call and ack them in one `ack_many` call.
    ClaimAckBatch,
    /// The full life of one job: enqueue, claim, ack.
    LifeOne,
    /// The full life of [`BATCH`] jobs: enqueue a batch, claim a batch,
    /// `ack_many` the batch.
    LifeBatch,
    /// Extend one live lease.
    Extend,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 7] = [
        Workload::EnqueueOne,
        Workload::EnqueueBatch,
        Workload::ClaimAckOne,
        Workload::ClaimAckBatch,
        Workload::LifeOne,
        Workload::LifeBatch,
        Workload::Extend,
    ];

    /// The benchmark group name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::EnqueueOne => "enqueue_1",
            Workload::EnqueueBatch => "enqueue_100",
            Workload::ClaimAckOne => "claim_ack_1",
            Workload::ClaimAckBatch => "claim_ack_100",
            Workload::LifeOne => "life_1",
            Workload::LifeBatch => "life_100",
            Workload::Extend => "extend",
        }
    }

    /// Jobs (or operations, for extend) per iteration.
    pub fn elements(self) -> u64 {
        match self {
            Workload::EnqueueBatch | Workload::ClaimAckBatch | Workload::LifeBatch => BATCH as u64,
            _ => 1,
        }
    }

    /// Whether the baselines have an equivalent of this workload.
    pub fn has_baseline(self) -> bool {
        self != Workload::Extend
    }

    /// Runs `iters` iterations against `backend` in `queue` and returns the
    /// time spent in the measured steps only; set-up (pre-filling the queue
    /// for claims) and clean-up are not timed. The queue is left empty.
    pub async fn run(
        self,
        backend: &dyn Backend,
        queue: &QueueName,
        iters: u64,
    ) -> Result<Duration> {
        let n = self.elements() as usize;
        let spec = ClaimSpec::new(n as u32, TTL)?;
        let timed = match self {
            Workload::EnqueueOne | Workload::EnqueueBatch => {
                let start = Instant::now();
                for _ in 0..iters {
                    backend.enqueue(queue, items(n)).await?;
                }
                let d = start.elapsed();
                backend.admin()?.purge(queue).await?;
                d
            }
            Workload::ClaimAckOne | Workload::ClaimAckBatch => {
                prefill(backend, queue, iters as usize * n).await?;
                let start = Instant::now();
                for _ in 0..iters {
                    let claimed = backend
                        .claim(queue, ClaimSpec::new(spec.max(), spec.ttl().get())?)
                        .await?;
                    expect_claimed(&claimed.leases, n)?;
                    ack_all(backend, &claimed.leases).await?;
                }
                start.elapsed()
            }
            Workload::LifeOne | Workload::LifeBatch => {
                let start = Instant::now();
                for _ in 0..iters {
                    backend.enqueue(queue, items(n)).await?;
                    let claimed = backend
                        .claim(queue, ClaimSpec::new(spec.max(), spec.ttl().get())?)
                        .await?;
                    expect_claimed(&claimed.leases, n)?;
                    ack_all(backend, &claimed.leases).await?;
                }
                start.elapsed()
            }
            Workload::Extend => {
                backend.enqueue(queue, items(1)).await?;
                let claimed = backend
                    .claim(queue, ClaimSpec::new(spec.max(), spec.ttl().get())?)
                    .await?;
                expect_claimed(&claimed.leases, 1)?;
                let ttl = spec.ttl();
                let start = Instant::now();
                for _ in 0..iters {
                    backend.extend(&claimed.leases[0].key, ttl).await?;
                }
                let d = start.elapsed();
                ack_all(backend, &claimed.leases).await?;
                d
            }
        };
        Ok(timed)
    }

    /// Runs `iters` iterations of the same shape against a baseline: pushes
    /// where the backend enqueues, pops where it claims and acks. `None`
    /// when the baseline has no equivalent ([`Workload::has_baseline`]).
    pub async fn run_baseline(
        self,
        baseline: &dyn Baseline,
        queue: &str,
        iters: u64,
    ) -> Result<Option<Duration>> {
        let n = self.elements() as usize;
        let payloads: Vec<Bytes> = (0..n).map(|_| payload()).collect();
        let timed = match self {
            Workload::Extend => return Ok(None),
            Workload::EnqueueOne | Workload::EnqueueBatch => {
                let start = Instant::now();
                for _ in 0..iters {
                    baseline.push(queue, &payloads).await?;
                }
                let d = start.elapsed();
                baseline.clear(queue).await?;
                d
            }
            Workload::ClaimAckOne | Workload::ClaimAckBatch => {
                let total = iters as usize * n;
                let chunk: Vec<Bytes> = (0..MAX_ENQUEUE_BATCH).map(|_| payload()).collect();
                let mut left = total;
                while left > 0 {
                    let k = left.min(MAX_ENQUEUE_BATCH);
                    baseline.push(queue, &chunk[..k]).await?;
                    left -= k;
                }
                let start = Instant::now();
                for _ in 0..iters {
                    let got = baseline.pop(queue, n).await?;
                    expect_count(got, n)?;
                }
                start.elapsed()
            }
            Workload::LifeOne | Workload::LifeBatch => {
                let start = Instant::now();
                for _ in 0..iters {
                    baseline.push(queue, &payloads).await?;
                    let got = baseline.pop(queue, n).await?;
                    expect_count(got, n)?;
                }
                start.elapsed()
            }
        };
        Ok(Some(timed))
    }
}

/// `n` fresh items with the bench payload.
fn items(n: usize) -> Vec<NewItem> {
    (0..n).map(|_| NewItem::new(payload())).collect()
}

/// Enqueues `total` items in the largest batches allowed.
pub(crate) async fn prefill(backend: &dyn Backend, queue: &QueueName, total: usize) -> Result<()> {
    let mut left = total;
    while left > 0 {
        let k = left.min(MAX_ENQUEUE_BATCH);
        backend.enqueue(queue, items(k)).await?;
        left -= k;
    }
    Ok(())
}

/// Acks every lease: one `ack` for a single lease, one `ack_many` for a
/// batch (one round trip per queue on the server backends). Every lease must
/// still be held.
pub async fn ack_all(backend: &dyn Backend, leases: &[Lease]) -> Result<()> {
    if let [one] = leases {
        return backend.ack(&one.key).await;
    }
    let keys: Vec<LeaseKey> = leases.iter().map(|l| l.key.clone()).collect();
    for r in backend.ack_many(&keys).await? {
        r?;
    }
    Ok(())
}

fn expect_claimed(leases: &[Lease], n: usize) -> Result<()> {
    expect_count(leases.len(), n)
}

fn expect_count(got: usize, n: usize) -> Result<()> {
    if got == n {
        Ok(())
    } else {
        Err(Error::Corrupt {
            what: format!(
                "bench expected {n} items but got {got}: the queue was not set up as planned"
            ),
        })
    }
}
