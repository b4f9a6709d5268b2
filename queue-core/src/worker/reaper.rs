//! The background reaper every worker runs: recovers expired leases of its
//! queue, and on a backend with the History group removes the finished
//! items the queue's retention no longer keeps. Reaps and collections from
//! many processes at once are safe (INV-4, [`crate::History::collect`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::metrics::Counter;
use super::shared::Shared;
use crate::BackendExt;

/// Reaps at once and then every `every` until `stop` fires.
pub(crate) async fn run(shared: Arc<Shared>, every: Duration, stop: CancellationToken) {
    // The first round runs as the worker starts: the leases a crashed
    // predecessor left are recovered at once, and the backend's upkeep
    // (a PostgreSQL table's dead rows) looks before the first drain.
    loop {
        match shared.backend.reap(&shared.queue).await {
            Ok(report) => {
                let m = &shared.metrics;
                m.add(Counter::Reaped, report.requeued);
                m.add(Counter::Dead, report.dead);
                m.add(Counter::Repaired, report.repairs.len() as u64);
                if report.recovered() > 0 {
                    tracing::info!(
                        queue = %shared.queue,
                        requeued = report.requeued,
                        dead = report.dead,
                        "reaper recovered expired leases"
                    );
                }
            }
            Err(e) => {
                shared.metrics.inc(Counter::BackendErrors);
                tracing::warn!(queue = %shared.queue, error = %e, "reap failed; trying again later");
            }
        }
        collect(&shared).await;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// Removes the kept finished items the queue's retention no longer keeps.
async fn collect(shared: &Shared) {
    let Ok(history) = shared.backend.history() else {
        return;
    };
    match history.collect(&shared.queue).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(queue = %shared.queue, removed = n, "collected finished items"),
        Err(e) => {
            shared.metrics.inc(Counter::BackendErrors);
            tracing::warn!(queue = %shared.queue, error = %e, "collecting finished items failed; trying again later");
        }
    }
}
