//! The reap workload: one reap over a queue holding `live` unexpired leases
//! and exactly [`EXPIRED`] expired ones.
//!
//! Set-up claims `live` items under the longest lease allowed, then leaves
//! [`EXPIRED`] items Ready. Each measured round claims those with a 1 ms
//! lease, lets them expire on the backend's clock (a manual clock is
//! advanced; a server clock is polled), and times the reap alone, which
//! sends them back to Ready for the next round.

use leaseq_core::BackendExt as _;
use std::time::{Duration, Instant};

use leaseq_conformance::{TestBackend, TimeControl};
use leaseq_core::limits::{MAX_CLAIM, MAX_LEASE_TTL};
use leaseq_core::{ClaimSpec, Error, NewItem, QueueName, Result};

use crate::payload;
use crate::workload::prefill;

/// Expired leases per measured reap.
pub const EXPIRED: usize = 10;

/// Live-lease counts the reap bench measures.
pub const LIVE: [usize; 3] = [100, 10_000, 100_000];

/// Puts `live` long leases and [`EXPIRED`] Ready items into an emptied
/// `queue`.
pub async fn setup(tb: &TestBackend, queue: &QueueName, live: usize) -> Result<()> {
    let b = tb.backend.as_ref();
    b.admin()?.purge(queue).await?;
    prefill(b, queue, live).await?;
    let mut claimed = 0;
    while claimed < live {
        let spec = ClaimSpec::new(MAX_CLAIM, MAX_LEASE_TTL)?;
        let got = b.claim(queue, spec).await?.leases.len();
        if got == 0 {
            break;
        }
        claimed += got;
    }
    // The same items expire round after round: give them attempts enough
    // never to go Dead (the most any backend stores).
    let items = (0..EXPIRED)
        .map(|_| NewItem::new(payload()).max_attempts(i32::MAX as u32))
        .collect();
    b.enqueue(queue, items).await?;
    // The claims counted the leases: `stats` may estimate a state of more
    // than 10,000 items (its contract).
    let stats = b.stats(queue).await?;
    if claimed != live || stats.ready != EXPIRED as u64 {
        return Err(Error::Corrupt {
            what: format!(
                "reap set-up wanted {live} leased and {EXPIRED} ready, found {claimed} and {}",
                stats.ready
            ),
        });
    }
    Ok(())
}

/// One round: expire [`EXPIRED`] leases (untimed), then time one reap.
pub async fn one_reap(tb: &TestBackend, queue: &QueueName) -> Result<Duration> {
    let b = tb.backend.as_ref();
    let claimed = b
        .claim(
            queue,
            ClaimSpec::new(EXPIRED as u32, Duration::from_millis(1))?,
        )
        .await?;
    let Some(deadline) = claimed.leases.iter().map(|l| l.expires_at).max() else {
        return Err(Error::Corrupt {
            what: "reap round found nothing to claim".into(),
        });
    };
    match &tb.time {
        TimeControl::Manual(clock) => clock.advance(Duration::from_millis(2)),
        TimeControl::Real => {
            while b.now().await? <= deadline {
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
        }
    }
    let start = Instant::now();
    let report = b.reap(queue).await?;
    let took = start.elapsed();
    if report.recovered() != claimed.leases.len() as u64 || claimed.leases.len() != EXPIRED {
        return Err(Error::Corrupt {
            what: format!(
                "reap recovered {} of {} expired leases",
                report.recovered(),
                claimed.leases.len()
            ),
        });
    }
    Ok(took)
}
