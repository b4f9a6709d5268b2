//! Enqueue inside the caller's transaction: the job exists if and only if
//! the caller's data commits (commit, rollback, and a process killed
//! before its commit).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use leaseq_core::{Backend, ClaimSpec, Error, NewItem, QueueName};
use leaseq_sqlite::sqlx::{self, Row};
use leaseq_sqlite::SqliteBackend;

const CHILD_DB: &str = "LEASEQ_SQLITE_TX_CHILD_DB";

fn queue() -> QueueName {
    QueueName::new("emails").expect("queue")
}

fn spec() -> ClaimSpec {
    ClaimSpec::new(10, Duration::from_secs(30)).expect("spec")
}

async fn orders_table(b: &SqliteBackend) {
    sqlx::query("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
        .execute(b.pool())
        .await
        .expect("create table");
}

async fn orders(b: &SqliteBackend) -> i64 {
    sqlx::query("SELECT count(*) FROM orders")
        .fetch_one(b.pool())
        .await
        .expect("count")
        .get(0)
}

#[tokio::test]
async fn a_committed_transaction_brings_its_job() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    orders_table(b).await;
    // Another process on the file (opened first: opening migrates, which
    // needs the write lock the transaction will hold).
    let other = common::open(&db.path).await;
    let mut tx = b.begin().await.expect("begin");
    sqlx::query("INSERT INTO orders VALUES (42)")
        .execute(&mut *tx)
        .await
        .expect("insert order");
    let ids = b
        .enqueue_in(&mut tx, &queue(), vec![NewItem::new("order 42 placed")])
        .await
        .expect("enqueue in the transaction");
    // Its readers see nothing before the commit.
    assert_eq!(other.stats(&queue()).await.expect("stats").total(), 0);
    tx.commit().await.expect("commit");
    assert_eq!(orders(b).await, 1);
    let claimed = b.claim(&queue(), spec()).await.expect("claim");
    assert_eq!(claimed.leases.len(), 1);
    assert_eq!(claimed.leases[0].key.id, ids[0].id);
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_no_job() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    orders_table(b).await;
    let mut tx = b.begin().await.expect("begin");
    sqlx::query("INSERT INTO orders VALUES (7)")
        .execute(&mut *tx)
        .await
        .expect("insert order");
    let ids = b
        .enqueue_in(
            &mut tx,
            &queue(),
            vec![NewItem::new("a"), NewItem::new("b").dedup_key("order-7")],
        )
        .await
        .expect("enqueue in the transaction");
    tx.rollback().await.expect("rollback");
    assert_eq!(orders(b).await, 0);
    assert_eq!(b.stats(&queue()).await.expect("stats").total(), 0);
    for e in &ids {
        assert!(matches!(
            b.item(&queue(), e.id).await,
            Err(Error::NotFound { .. })
        ));
    }
    let again = b
        .enqueue(&queue(), vec![NewItem::new("b").dedup_key("order-7")])
        .await
        .expect("enqueue");
    assert!(!again[0].deduplicated, "a rolled-back key is not held");
}

/// The child: opens the file, writes an order and its job in one
/// transaction, says so, and waits to be killed before committing.
#[test]
fn child() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let path = PathBuf::from(path);
        let b = common::open(&path).await;
        let mut tx = b.begin().await.expect("begin");
        sqlx::query("INSERT INTO orders VALUES (9)")
            .execute(&mut *tx)
            .await
            .expect("insert order");
        b.enqueue_in(&mut tx, &queue(), vec![NewItem::new("order 9 placed")])
            .await
            .expect("enqueue in the transaction");
        std::fs::write(path.with_extension("ready"), b"").expect("marker");
        tokio::time::sleep(Duration::from_secs(600)).await;
    });
}

#[tokio::test]
async fn a_process_killed_before_its_commit_leaves_no_job() {
    let db = common::TestDb::new().await;
    orders_table(&db.backend).await;
    db.backend.close().await;
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, &db.path)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn child");
    let marker = db.path.with_extension("ready");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "the child never got to its commit"
        );
        assert!(
            child.try_wait().expect("child").is_none(),
            "the child exited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap child");
    let b = common::open(&db.path).await;
    assert_eq!(orders(&b).await, 0);
    assert_eq!(b.stats(&queue()).await.expect("stats").total(), 0);
    assert!(b
        .claim(&queue(), spec())
        .await
        .expect("claim")
        .leases
        .is_empty());
    b.verify().await.expect("the file is sound");
}
