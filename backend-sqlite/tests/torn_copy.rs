//! A copy of the file taken mid-storm, as a backup tool that knows nothing
//! of SQLite would take it (the database file, then its WAL, each read in
//! chunks while writers go on), opens cleanly or fails with a clear error:
//! never a panic or a hang.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaseq_core::{Backend, BackendExt, LeaseKey, NewItem, QueueName};
use leaseq_sqlite::SqliteBackend;

/// Copies `from` to `to` in 16 KiB chunks with a pause between them, so
/// writers change the file while it is being read. A missing file is
/// skipped.
fn slow_copy(from: &Path, to: &Path) {
    let Ok(mut src) = std::fs::File::open(from) else {
        return;
    };
    let mut dst = std::fs::File::create(to).expect("create copy");
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = src.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        dst.write_all(&buf[..n]).expect("write copy");
        std::thread::sleep(Duration::from_micros(300));
    }
}

/// What became of one copy.
#[derive(Debug)]
enum Verdict {
    /// Opened, checked intact, and its queue drained.
    Clean(u64),
    /// Refused, or found damaged, with this error.
    Refused(String),
}

async fn open_copy(path: &Path) -> Verdict {
    let url = common::url(path);
    let b = match SqliteBackend::connect(&url, common::options()).await {
        Ok(b) => b,
        Err(e) => return Verdict::Refused(e.to_string()),
    };
    if let Err(e) = b.verify().await {
        return Verdict::Refused(e.to_string());
    }
    let q = QueueName::new("torn").expect("queue");
    let mut drained = 0;
    loop {
        let claimed = match b.claim_up_to(&q, 100, Duration::from_secs(60)).await {
            Ok(c) => c,
            Err(e) => return Verdict::Refused(e.to_string()),
        };
        if claimed.leases.is_empty() {
            break;
        }
        let keys: Vec<LeaseKey> = claimed.leases.iter().map(|l| l.key.clone()).collect();
        match b.ack_many(&keys).await {
            Ok(r) => drained += r.iter().filter(|r| r.is_ok()).count() as u64,
            Err(e) => return Verdict::Refused(e.to_string()),
        }
    }
    Verdict::Clean(drained)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_taken_mid_storm_opens_or_fails_clearly() {
    let db = common::TestDb::new().await;
    let q = QueueName::new("torn").expect("queue");
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for p in 0..2 {
        let (b, q, stop) = (db.backend.clone(), q.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let items = (0..50)
                    .map(|i| {
                        NewItem::new(vec![p as u8; 100 + (i % 7) * 50])
                            .dedup_key(format!("{p}-{round}-{i}"))
                    })
                    .collect();
                b.enqueue(&q, items).await.expect("enqueue");
                round += 1;
            }
        }));
    }
    {
        let (b, q, stop) = (db.backend.clone(), q.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let claimed = b
                    .claim_up_to(&q, 20, Duration::from_secs(30))
                    .await
                    .expect("claim");
                for l in claimed.leases.iter().step_by(2) {
                    b.ack(&l.key).await.expect("ack");
                }
            }
        }));
    }
    let copies: Vec<PathBuf> = {
        let src = db.path.clone();
        let dir = db.path.parent().expect("dir").to_path_buf();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            for i in 0..6 {
                std::thread::sleep(Duration::from_millis(150));
                let to = dir.join(format!("copy-{i}.db"));
                slow_copy(&src, &to);
                // Half the copies also take the WAL, as a backup of the
                // directory would; the others only the main file.
                if i % 2 == 0 {
                    slow_copy(&src.with_extension("db-wal"), &to.with_extension("db-wal"));
                }
                out.push(to);
            }
            out
        })
        .await
        .expect("copy")
    };
    // A backup taken the supported way, mid-storm, is always whole.
    let backup = db.path.with_file_name("backup.db");
    db.backend.backup(&backup).await.expect("backup");
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("storm task");
    }
    for copy in &copies {
        let verdict = tokio::time::timeout(Duration::from_secs(60), open_copy(copy))
            .await
            .unwrap_or_else(|_| panic!("opening {} hung", copy.display()));
        println!("{}: {verdict:?}", copy.display());
        if let Verdict::Refused(why) = &verdict {
            assert!(
                why.starts_with("sqlite") || why.contains("sqlite"),
                "unclear error: {why}"
            );
        }
    }
    let verdict = open_copy(&backup).await;
    assert!(
        matches!(verdict, Verdict::Clean(n) if n > 0),
        "the backup: {verdict:?}"
    );
    // The original is intact whatever the copies went through.
    db.backend.verify().await.expect("the original is intact");
}
