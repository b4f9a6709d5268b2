//! Several OS processes on one file: two workers claiming at once, and a
//! process killed with SIGKILL in the middle of a storm, at both
//! durability levels (`synchronous=NORMAL` defers only the `fsync`, so a
//! killed process loses nothing there either).
//!
//! The children are this test binary run again with the test `child` and
//! an environment variable naming their role; they report through files
//! in the test's directory, one id per line, written after each call
//! returned.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use leaseq_core::{Backend, BackendExt, LeaseKey, NewItem, QueueName};
use leaseq_sqlite::{Durability, SqliteBackend};

const ROLE: &str = "LEASEQ_SQLITE_CHILD_ROLE";
const DIR: &str = "LEASEQ_SQLITE_CHILD_DIR";
const NAME: &str = "LEASEQ_SQLITE_CHILD_NAME";
const SYNC: &str = "LEASEQ_SQLITE_CHILD_SYNC";

fn queue() -> QueueName {
    QueueName::new("procs").expect("queue name")
}

/// Appends `ids`, one a line, in one write (a killed process leaves whole
/// lines, or a last partial line that [`read_ids`] skips).
fn append(path: &Path, ids: impl IntoIterator<Item = u64>) {
    let text: String = ids.into_iter().map(|id| format!("{id}\n")).collect();
    if text.is_empty() {
        return;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open report file");
    f.write_all(text.as_bytes()).expect("write report");
}

/// Every whole id line of every file in `dir` whose name starts with `prefix`.
fn read_ids(dir: &Path, prefix: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        if !entry.file_name().to_string_lossy().starts_with(prefix) {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).expect("read report");
        for line in text.split_inclusive('\n') {
            if let Some(id) = line.strip_suffix('\n').and_then(|l| l.parse().ok()) {
                out.push(id);
            }
        }
    }
    out
}

/// The child's entry: does nothing unless started by a test below.
#[test]
fn child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).expect("dir"));
    let name = std::env::var(NAME).expect("name");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let durability = match std::env::var(SYNC).as_deref() {
        Ok("normal") => Durability::Normal,
        _ => Durability::Full,
    };
    rt.block_on(async move {
        let backend = open_at(&dir.join("jobs.db"), durability).await;
        while !dir.join("go").exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        match role.as_str() {
            "worker" => worker(backend, &dir, &name).await,
            "storm" => storm(backend, &dir, &name).await,
            other => panic!("unknown role {other}"),
        }
    });
}

/// Claims and acks until the queue is empty, reporting every lease.
async fn worker(b: SqliteBackend, dir: &Path, name: &str) {
    let q = queue();
    let mut idle = 0;
    while idle < 20 {
        let claimed = b
            .claim_up_to(&q, 5, Duration::from_secs(120))
            .await
            .expect("claim");
        if claimed.leases.is_empty() {
            idle += 1;
            b.wait_for_work(&q, Duration::from_millis(20)).await;
            continue;
        }
        idle = 0;
        append(
            &dir.join(format!("claimed-{name}")),
            claimed.leases.iter().map(|l| l.id().get()),
        );
        let keys: Vec<LeaseKey> = claimed.leases.iter().map(|l| l.key.clone()).collect();
        for r in b.ack_many(&keys).await.expect("ack_many") {
            r.expect("ack of a lease this worker holds");
        }
    }
}

/// Producers and consumers at full speed until the process is killed.
/// Consumers ack half their leases and drop the rest (they expire).
async fn storm(b: SqliteBackend, dir: &Path, name: &str) {
    let q = queue();
    let mut tasks = Vec::new();
    for p in 0..2 {
        let (b, q, file) = (
            b.clone(),
            q.clone(),
            dir.join(format!("enqueued-{name}-{p}")),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0u64.. {
                let items = (0..20)
                    .map(|i| {
                        NewItem::new(format!("{p}-{round}-{i}").into_bytes()).max_attempts(1000)
                    })
                    .collect();
                if let Ok(done) = b.enqueue(&q, items).await {
                    append(&file, done.iter().map(|e| e.id.get()));
                }
            }
        }));
    }
    for c in 0..2 {
        let (b, q) = (b.clone(), q.clone());
        let intent = dir.join(format!("acking-{name}-{c}"));
        let acked = dir.join(format!("acked-{name}-{c}"));
        tasks.push(tokio::spawn(async move {
            loop {
                let Ok(claimed) = b.claim_up_to(&q, 10, Duration::from_secs(1)).await else {
                    continue;
                };
                let keys: Vec<LeaseKey> = claimed
                    .leases
                    .iter()
                    .filter(|l| l.id().get() % 2 == 0)
                    .map(|l| l.key.clone())
                    .collect();
                append(&intent, keys.iter().map(|k| k.id.get()));
                if let Ok(results) = b.ack_many(&keys).await {
                    append(
                        &acked,
                        keys.iter()
                            .zip(results)
                            .filter(|(_, r)| r.is_ok())
                            .map(|(k, _)| k.id.get()),
                    );
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// A backend on `path` at `durability`.
async fn open_at(path: &Path, durability: Durability) -> SqliteBackend {
    SqliteBackend::connect(&common::url(path), common::options().durability(durability))
        .await
        .expect("open the database file")
}

/// Starts this binary as a child in `role`, at [`Durability::Full`].
fn spawn(dir: &Path, role: &str, name: &str) -> Child {
    spawn_at(dir, role, name, Durability::Full)
}

/// Starts this binary as a child in `role`, opening the file at `durability`.
fn spawn_at(dir: &Path, role: &str, name: &str, durability: Durability) -> Child {
    let sync = if durability == Durability::Normal {
        "normal"
    } else {
        "full"
    };
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DIR, dir)
        .env(NAME, name)
        .env(SYNC, sync)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn a child process")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_claim_from_one_file() {
    const N: usize = 2_000;
    let dir = tempfile::tempdir().expect("temp dir");
    let b = common::open(&dir.path().join("jobs.db")).await;
    let q = queue();
    let mut enqueued = BTreeSet::new();
    for chunk in 0..N / 100 {
        let items = (0..100)
            .map(|i| NewItem::new(format!("{chunk}-{i}").into_bytes()))
            .collect();
        for e in b.enqueue(&q, items).await.expect("enqueue") {
            enqueued.insert(e.id.get());
        }
    }
    let children: Vec<Child> = ["a", "b"]
        .iter()
        .map(|name| spawn(dir.path(), "worker", name))
        .collect();
    std::fs::write(dir.path().join("go"), b"").expect("go");
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait())
            .await
            .expect("join")
            .expect("wait");
        assert!(status.success(), "a worker failed: {status}");
    }
    let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
    for id in read_ids(dir.path(), "claimed-") {
        *seen.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "leased more than once: {twice:?}");
    let claimed: BTreeSet<u64> = seen.keys().copied().collect();
    assert_eq!(claimed, enqueued, "every item claimed once, none lost");
    let a = read_ids(dir.path(), "claimed-a").len();
    let bb = read_ids(dir.path(), "claimed-b").len();
    assert!(a > 0 && bb > 0, "both processes claimed (a {a}, b {bb})");
    let s = b.stats(&q).await.expect("stats");
    assert_eq!((s.ready, s.scheduled, s.leased, s.dead), (0, 0, 0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_storm_loses_nothing() {
    sigkill_mid_storm(Durability::Full).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_storm_loses_nothing_at_normal_durability() {
    sigkill_mid_storm(Durability::Normal).await;
}

/// A storm child at `durability` is SIGKILLed; a new opener finds every
/// Ok-enqueued item and acks each once.
async fn sigkill_mid_storm(durability: Durability) {
    let dir = tempfile::tempdir().expect("temp dir");
    // Create the file (and its schema) before the child starts.
    drop(open_at(&dir.path().join("jobs.db"), durability).await);
    let mut child = spawn_at(dir.path(), "storm", "s", durability);
    std::fs::write(dir.path().join("go"), b"").expect("go");
    // Let the storm run until it has written a good deal.
    let start = Instant::now();
    while read_ids(dir.path(), "enqueued-").len() < 2_000
        && start.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // std's kill is SIGKILL on Unix: no destructor, no checkpoint.
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("reap the child");
    assert!(
        !status.success(),
        "the child was killed, not finished: {status}"
    );

    let enqueued: BTreeSet<u64> = read_ids(dir.path(), "enqueued-").into_iter().collect();
    let acked_before: BTreeSet<u64> = read_ids(dir.path(), "acked-").into_iter().collect();
    let attempted: BTreeSet<u64> = read_ids(dir.path(), "acking-").into_iter().collect();
    assert!(
        enqueued.len() >= 2_000,
        "the storm enqueued {}",
        enqueued.len()
    );

    // A new process opens the file: this one, which never had it open
    // while the child wrote.
    let b = open_at(&dir.path().join("jobs.db"), durability).await;
    let q = queue();
    let mut acked_after = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        b.reap(&q).await.expect("reap");
        let claimed = b
            .claim_up_to(&q, 100, Duration::from_secs(60))
            .await
            .expect("claim");
        for l in &claimed.leases {
            b.ack(&l.key).await.expect("ack");
            assert!(
                acked_after.insert(l.id().get()),
                "{} acked twice after reopening",
                l.id()
            );
        }
        let s = b.stats(&q).await.expect("stats");
        if claimed.leases.is_empty() && s.ready + s.scheduled + s.leased == 0 {
            assert_eq!(s.dead, 0, "nothing may go dead");
            break;
        }
        assert!(Instant::now() < deadline, "the queue did not drain: {s:?}");
        if claimed.leases.is_empty() {
            // The child's leases (1 s) have not expired yet.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let twice: Vec<_> = acked_before.intersection(&acked_after).collect();
    assert!(
        twice.is_empty(),
        "acked before the kill and again after: {twice:?}"
    );
    // An ack whose reply the kill swallowed was applied or not: either the
    // item is gone (attempted) or it was acked after reopening.
    let lost: Vec<_> = enqueued
        .iter()
        .filter(|id| {
            !acked_before.contains(id) && !acked_after.contains(id) && !attempted.contains(id)
        })
        .collect();
    assert!(lost.is_empty(), "Ok-enqueued items never acked: {lost:?}");
    println!(
        "{durability:?}: enqueued {} (Ok), acked before the kill {}, after {}",
        enqueued.len(),
        acked_before.len(),
        acked_after.len()
    );
}
