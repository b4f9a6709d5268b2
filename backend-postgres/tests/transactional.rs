//! Enqueue inside the caller's transaction: the job exists if and only if
//! the caller's data commits (commit, rollback, and a connection that dies
//! before the commit).

mod common;

use std::time::Duration;

use leaseq_core::{Backend, ClaimSpec, Error, NewItem, QueueName};
use leaseq_postgres::sqlx::{self, Connection, PgConnection, Row};

fn spec() -> ClaimSpec {
    ClaimSpec::new(10, Duration::from_secs(30)).expect("spec")
}

/// An application table beside the queue, in the test's schema.
async fn orders_table(db: &common::TestDb) -> String {
    let table = format!("{}.orders", db.schema);
    sqlx::query(&format!("CREATE TABLE {table} (id bigint PRIMARY KEY)"))
        .execute(db.backend.pool())
        .await
        .expect("create table");
    table
}

async fn orders(db: &common::TestDb, table: &str) -> i64 {
    sqlx::query(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(db.backend.pool())
        .await
        .expect("count")
        .get(0)
}

#[tokio::test]
async fn a_committed_transaction_brings_its_job_and_not_before() {
    let Some(db) = common::TestDb::new("tx_commit").await else {
        return;
    };
    let b = &db.backend;
    let table = orders_table(&db).await;
    let queue = QueueName::new("emails").expect("queue");
    let mut tx = b.begin().await.expect("begin");
    sqlx::query(&format!("INSERT INTO {table} VALUES (42)"))
        .execute(&mut *tx)
        .await
        .expect("insert order");
    let ids = b
        .enqueue_in(&mut tx, &queue, vec![NewItem::new("order 42 placed")])
        .await
        .expect("enqueue in the transaction");
    // Uncommitted: no other connection sees the job.
    assert_eq!(b.stats(&queue).await.expect("stats").total(), 0);
    assert!(b
        .claim(&queue, spec())
        .await
        .expect("claim")
        .leases
        .is_empty());
    tx.commit().await.expect("commit");
    assert_eq!(orders(&db, &table).await, 1);
    let claimed = b.claim(&queue, spec()).await.expect("claim");
    assert_eq!(claimed.leases.len(), 1);
    assert_eq!(claimed.leases[0].key.id, ids[0].id);
    assert_eq!(claimed.leases[0].payload, "order 42 placed");
}

#[tokio::test]
async fn a_rolled_back_transaction_leaves_no_job() {
    let Some(db) = common::TestDb::new("tx_rollback").await else {
        return;
    };
    let b = &db.backend;
    let table = orders_table(&db).await;
    let queue = QueueName::new("emails").expect("queue");
    let mut tx = b.pool().begin().await.expect("begin");
    sqlx::query(&format!("INSERT INTO {table} VALUES (7)"))
        .execute(&mut *tx)
        .await
        .expect("insert order");
    let ids = b
        .enqueue_in(
            &mut tx,
            &queue,
            vec![NewItem::new("a"), NewItem::new("b").dedup_key("order-7")],
        )
        .await
        .expect("enqueue in the transaction");
    tx.rollback().await.expect("rollback");
    assert_eq!(orders(&db, &table).await, 0);
    assert_eq!(b.stats(&queue).await.expect("stats").total(), 0);
    for e in &ids {
        assert!(matches!(
            b.item(&queue, e.id).await,
            Err(Error::NotFound { .. })
        ));
    }
    // The dedup key was never held: a new enqueue with it is not deduplicated.
    let again = b
        .enqueue(&queue, vec![NewItem::new("b").dedup_key("order-7")])
        .await
        .expect("enqueue");
    assert!(!again[0].deduplicated);
    assert_ne!(again[0].id, ids[1].id, "ids are never reused");
}

#[tokio::test]
async fn a_connection_that_dies_before_the_commit_leaves_no_job() {
    let Some(db) = common::TestDb::new("tx_crash").await else {
        return;
    };
    let b = &db.backend;
    let table = orders_table(&db).await;
    let queue = QueueName::new("emails").expect("queue");
    let mut conn = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    let pid: i32 = sqlx::query("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .expect("pid")
        .get(0);
    let mut tx = conn.begin().await.expect("begin");
    sqlx::query(&format!("INSERT INTO {table} VALUES (9)"))
        .execute(&mut *tx)
        .await
        .expect("insert order");
    b.enqueue_in(&mut tx, &queue, vec![NewItem::new("order 9 placed")])
        .await
        .expect("enqueue in the transaction");
    // The application's process dies: its session ends before COMMIT.
    let killed: bool = sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(b.pool())
        .await
        .expect("terminate")
        .get(0);
    assert!(killed);
    assert!(tx.commit().await.is_err(), "a dead session cannot commit");
    assert_eq!(orders(&db, &table).await, 0);
    assert_eq!(b.stats(&queue).await.expect("stats").total(), 0);
    assert!(b
        .claim(&queue, spec())
        .await
        .expect("claim")
        .leases
        .is_empty());
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    let Some(db) = common::TestDb::new("tx_input").await else {
        return;
    };
    let b = &db.backend;
    let queue = QueueName::new("emails").expect("queue");
    let mut tx = b.pool().begin().await.expect("begin");
    let err = b
        .enqueue_in(&mut tx, &queue, vec![NewItem::new("x").dedup_key("a\0b")])
        .await
        .expect_err("NUL in a dedup key");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err}");
    // The transaction is still usable: nothing was sent.
    sqlx::query("SELECT 1")
        .execute(&mut *tx)
        .await
        .expect("transaction still open");
    tx.commit().await.expect("commit");
}
