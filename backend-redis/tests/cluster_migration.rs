//! A slot migration under a storm: the slot holding a queue moves to
//! another master (`CLUSTER SETSLOT … IMPORTING / MIGRATING`, `MIGRATE` in
//! batches of 10 keys as `redis-cli --cluster reshard` does, `SETSLOT …
//! NODE`) while producers enqueue, consumers claim and ack, and a reaper
//! runs. Every item must be acked exactly once: 0 lost, 0 acked twice.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::{node_text, LocalCluster};
use common::Which;
use leaseq_core::{Backend, BackendExt, ClaimSpec, NewItem, QueueName};
use leaseq_redis::keys::KeyLayout;

const BEFORE: u64 = 1_500;
const DURING: u64 = 1_500;

fn cmd(port: u16, args: &[String]) -> Result<redis::Value, String> {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{port}")).map_err(|e| e.to_string())?;
    let mut c = client.get_connection().map_err(|e| e.to_string())?;
    let mut cmd = redis::cmd(&args[0]);
    for a in &args[1..] {
        cmd.arg(a);
    }
    cmd.query(&mut c).map_err(|e| format!("{args:?}: {e}"))
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Moves `slot` from `from` to `to`, 10 keys per MIGRATE, pausing between
/// batches so the storm runs against the split slot. Returns keys moved.
fn migrate_slot(ports: &[u16], slot: u16, from: u16, to: u16) -> Result<usize, String> {
    let from_id = node_text(from, &["CLUSTER", "MYID"])?;
    let to_id = node_text(to, &["CLUSTER", "MYID"])?;
    let slot_s = slot.to_string();
    cmd(
        to,
        &s(&["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &from_id]),
    )?;
    cmd(
        from,
        &s(&["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &to_id]),
    )?;
    let mut moved = 0;
    loop {
        let keys: Vec<String> = match cmd(from, &s(&["CLUSTER", "GETKEYSINSLOT", &slot_s, "10"]))? {
            redis::Value::Array(a) => a
                .into_iter()
                .filter_map(|v| match v {
                    redis::Value::BulkString(b) => String::from_utf8(b).ok(),
                    _ => None,
                })
                .collect(),
            other => return Err(format!("GETKEYSINSLOT: {other:?}")),
        };
        if keys.is_empty() {
            break;
        }
        let mut args = s(&[
            "MIGRATE",
            "127.0.0.1",
            &to.to_string(),
            "",
            "0",
            "5000",
            "KEYS",
        ]);
        moved += keys.len();
        args.extend(keys);
        cmd(from, &args)?;
        std::thread::sleep(Duration::from_millis(3));
    }
    for &p in [to, from]
        .iter()
        .chain(ports.iter().filter(|&&p| p != to && p != from))
    {
        cmd(p, &s(&["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id]))?;
    }
    Ok(moved)
}

async fn storm_through_migration(which: Which) {
    let cluster = match LocalCluster::start() {
        Ok(c) => c,
        Err(e) => return common::unavailable("a local Redis Cluster", e),
    };
    let prefix = common::fresh_prefix("mig");
    let backend: Arc<dyn Backend> = common::connect(which, cluster.config(&prefix))
        .await
        .expect("backend on the cluster");
    let queue = QueueName::new("storm").expect("name");
    let slot = KeyLayout::new(&prefix, &queue).expect("layout").slot();
    let from = cluster.owner_of(slot).expect("owner");
    let to = *cluster
        .ports
        .iter()
        .find(|&&p| p != from)
        .expect("another master");

    for chunk in (0..BEFORE).collect::<Vec<_>>().chunks(100) {
        let items = chunk.iter().map(|i| NewItem::new(i.to_string())).collect();
        backend
            .enqueue(&queue, items)
            .await
            .expect("enqueue before");
    }

    let acked: Arc<Mutex<HashMap<u64, u32>>> = Arc::default();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    let produced_all = Arc::new(AtomicBool::new(false));
    let mut tasks = tokio::task::JoinSet::new();

    // Producer: enqueues DURING more items in batches of 10.
    {
        let (b, q, done, errors) = (
            backend.clone(),
            queue.clone(),
            produced_all.clone(),
            errors.clone(),
        );
        tasks.spawn(async move {
            for base in (BEFORE..BEFORE + DURING).step_by(10) {
                let items: Vec<NewItem> = (base..base + 10)
                    .map(|i| NewItem::new(i.to_string()))
                    .collect();
                if let Err(e) = b.enqueue(&q, items).await {
                    errors.lock().expect("lock").push(format!(
                        "enqueue {base}: {e}: {:?}",
                        std::error::Error::source(&e).map(|s| s.to_string())
                    ));
                }
            }
            done.store(true, Ordering::SeqCst);
        });
    }
    // Consumers.
    for _ in 0..4 {
        let (b, q, acked, errors, done) = (
            backend.clone(),
            queue.clone(),
            acked.clone(),
            errors.clone(),
            produced_all.clone(),
        );
        tasks.spawn(async move {
            let new_spec = || ClaimSpec::new(10, Duration::from_secs(30)).expect("spec");
            let mut spec = new_spec();
            loop {
                let finished = acked.lock().expect("lock").len() as u64 >= BEFORE + DURING;
                if finished && done.load(Ordering::SeqCst) {
                    return;
                }
                // A failed claim is sent again as the same claim (its
                // tokens); after a reply the next claim gets a new spec.
                let claimed = match b.claim(&q, spec.duplicate()).await {
                    Ok(c) => {
                        spec = new_spec();
                        c
                    }
                    Err(e) => {
                        errors.lock().expect("lock").push(format!("claim: {e}"));
                        continue;
                    }
                };
                if claimed.leases.is_empty() {
                    if done.load(Ordering::SeqCst)
                        && acked.lock().expect("lock").len() as u64 >= BEFORE + DURING
                    {
                        return;
                    }
                    b.wait_for_work(&q, Duration::from_millis(20)).await;
                }
                for lease in claimed.leases {
                    let n: u64 = std::str::from_utf8(&lease.payload)
                        .expect("utf8")
                        .parse()
                        .expect("number");
                    match b.ack(&lease.key).await {
                        Ok(()) => *acked.lock().expect("lock").entry(n).or_default() += 1,
                        Err(e) => errors.lock().expect("lock").push(format!(
                            "ack {n}: {e}: {:?}",
                            std::error::Error::source(&e).map(|s| s.to_string())
                        )),
                    }
                }
            }
        });
    }
    // Reaper.
    {
        let (b, q, acked, done) = (
            backend.clone(),
            queue.clone(),
            acked.clone(),
            produced_all.clone(),
        );
        tasks.spawn(async move {
            while !(done.load(Ordering::SeqCst)
                && acked.lock().expect("lock").len() as u64 >= BEFORE + DURING)
            {
                let _ = b.reap(&q).await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    }
    let ports = cluster.ports.clone();
    let moved = tokio::task::spawn_blocking(move || migrate_slot(&ports, slot, from, to))
        .await
        .expect("join")
        .expect("migration");

    let all = tokio::time::timeout(Duration::from_secs(60), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    let acked = acked.lock().expect("lock").clone();
    let errors = errors.lock().expect("lock").clone();
    assert!(
        all.is_ok(),
        "storm did not finish: {} of {} acked, errors {errors:?}",
        acked.len(),
        BEFORE + DURING
    );
    let lost: Vec<u64> = (0..BEFORE + DURING)
        .filter(|i| !acked.contains_key(i))
        .collect();
    let twice: Vec<(&u64, &u32)> = acked.iter().filter(|(_, &n)| n > 1).collect();
    println!(
        "{}: slot {slot} moved {from} -> {to} ({moved} keys) under the storm; acked {}, lost {}, acked twice {}, errors {}",
        which.name(),
        acked.len(),
        lost.len(),
        twice.len(),
        errors.len()
    );
    assert!(moved > 0, "the migration moved no keys");
    assert!(lost.is_empty(), "lost items: {lost:?}");
    assert!(twice.is_empty(), "acked twice: {twice:?}");
    assert!(errors.is_empty(), "errors during the storm: {errors:?}");
    assert_eq!(
        cluster.owner_of(slot).expect("owner"),
        to,
        "the slot did not move"
    );
    let stats = backend.stats(&queue).await.expect("stats");
    assert_eq!(stats.total(), 0, "items left behind: {stats:?}");
    assert!(backend
        .claim_one(&queue, Duration::from_secs(1))
        .await
        .expect("claim")
        .is_none());
}

#[cfg(feature = "redis-rs")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slot_migration_under_storm_redis_rs() {
    storm_through_migration(Which::RedisRs).await;
}

#[cfg(feature = "fred")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slot_migration_under_storm_fred() {
    storm_through_migration(Which::Fred).await;
}
