//! The live-worker registry: an entry is listed from its registration
//! until it expires or is removed, renewing moves its expiry, and bad
//! entries are refused.
//!
//! For backends that offer [`leaseq_core::WorkerRegistry`].

use std::time::Duration;

use leaseq_core::{BackendExt, Error, ItemId, RunningJob, WorkerEntry};

use crate::cx::{run, Needs, LONG, SHORT};
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule};

const RULE: Rule = Rule::Contract("WorkerRegistry");

/// Two workers register; both are listed (sorted by id, with their jobs
/// and an expiry after now); one registered with a short time-to-live
/// drops out once it passes, the other once it is deregistered. Entries
/// over the size bound and bad times-to-live are refused.
pub async fn registry_lists_live_workers(factory: &dyn BackendFactory) -> CheckResult {
    run(
        factory,
        "registry_lists_live_workers",
        RULE,
        Needs::REGISTRY,
        |cx| async move {
            let registry = cx.b.registry().or_fail(RULE, "registry")?;
            // Ids unique to this check, as the registry is shared by the store.
            let tag = cx.q.as_str().to_owned();
            let started = cx.now().await?;
            let mut long = WorkerEntry::new(format!("{tag}-b"), &cx.q, 4, started);
            long.jobs.push(RunningJob {
                id: ItemId::new(7),
                attempt: 2,
                started_at: started.as_millis(),
            });
            let short = WorkerEntry::new(format!("{tag}-a"), &cx.q, 1, started);
            let until = registry
                .register(&long, LONG)
                .await
                .or_fail(RULE, "register")?;
            ensure!(
                until >= started.saturating_add(LONG),
                RULE,
                "register answered expiry {until}, before now + ttl"
            );
            let short_until = registry
                .register(&short, SHORT)
                .await
                .or_fail(RULE, "register")?;
            let mine = |all: Vec<WorkerEntry>| -> Vec<WorkerEntry> {
                all.into_iter().filter(|e| e.id.starts_with(&tag)).collect()
            };
            let listed = mine(registry.workers().await.or_fail(RULE, "workers")?);
            let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
            ensure!(
                ids == [short.id.as_str(), long.id.as_str()],
                RULE,
                "workers listed {ids:?}; expected both, sorted by id"
            );
            ensure!(
                listed[1].jobs == long.jobs
                    && listed[1].concurrency == 4
                    && listed[1].expires_at == until.as_millis(),
                RULE,
                "the listed entry {:?} differs from what was registered ({:?}, expiring {until})",
                listed[1],
                long
            );
            cx.wait_past(short_until).await?;
            let listed = mine(registry.workers().await.or_fail(RULE, "workers")?);
            let ids: Vec<&str> = listed.iter().map(|e| e.id.as_str()).collect();
            ensure!(
                ids == [long.id.as_str()],
                RULE,
                "after the short entry's expiry, workers listed {ids:?}"
            );
            ensure!(
                registry
                    .deregister(&long.id)
                    .await
                    .or_fail(RULE, "deregister")?,
                RULE,
                "deregister of a listed entry answered false"
            );
            ensure!(
                !registry
                    .deregister(&long.id)
                    .await
                    .or_fail(RULE, "deregister")?,
                RULE,
                "a second deregister answered true"
            );
            let listed = mine(registry.workers().await.or_fail(RULE, "workers")?);
            ensure!(
                listed.is_empty(),
                RULE,
                "after deregister, workers still lists {listed:?}"
            );
            let mut huge = WorkerEntry::new(format!("{tag}-c"), &cx.q, 1, started);
            huge.host = "h".repeat(leaseq_core::limits::MAX_WORKER_ENTRY_LEN);
            for (what, entry, ttl) in [
                ("an entry over the size bound", &huge, LONG),
                ("a zero ttl", &short, Duration::ZERO),
            ] {
                match registry.register(entry, ttl).await {
                    Err(Error::InvalidInput { .. }) => {}
                    other => {
                        return Err(cx.fail(format!(
                            "register with {what} answered {other:?}; expected InvalidInput"
                        )))
                    }
                }
            }
            let listed = mine(registry.workers().await.or_fail(RULE, "workers")?);
            ensure!(
                listed.is_empty(),
                RULE,
                "refused registrations left {listed:?}"
            );
            Ok(())
        },
    )
    .await
}
