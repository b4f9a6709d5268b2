//! Plain operations on a file, and what is special to SQLite: the file,
//! the in-memory URL, durability settings and reopening.

mod common;

use std::time::Duration;

use leaseq_core::{Backend, BackendExt, NewItem, QueueName};

fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

#[tokio::test]
async fn round_trip_on_a_file() {
    let db = common::TestDb::new().await;
    let q = queue("basic");
    let ids = db
        .backend
        .enqueue(
            &q,
            vec![NewItem::new(b"a".to_vec()), NewItem::new(b"b".to_vec())],
        )
        .await
        .map_err(|e| format!("{e:?}"))
        .expect("enqueue");
    assert_eq!(ids.len(), 2);
    let lease = db
        .backend
        .claim_one(&q, Duration::from_secs(30))
        .await
        .map_err(|e| format!("{e:?}"))
        .expect("claim")
        .expect("a lease");
    assert_eq!(lease.payload.as_ref(), b"a");
    db.backend.ack(&lease.key).await.expect("ack");
    assert!(db
        .backend
        .ack(&lease.key)
        .await
        .is_err_and(|e| e.is_lease_lost()));
}

#[tokio::test]
async fn without_migrations_a_missing_or_empty_file_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nothing.db");
    let options = common::options().migrate_on_connect(false);
    let missing = leaseq_sqlite::SqliteBackend::connect(&common::url(&path), options.clone()).await;
    let err = missing.expect_err("a missing file was opened");
    assert!(!path.exists(), "a missing file was created");
    let text = err.to_string();
    assert!(
        text.contains("no database file at") && text.contains("leaseq migrate"),
        "{text}"
    );
    // With migrations on, a missing directory is named.
    let in_nowhere = dir.path().join("no-such-dir").join("jobs.db");
    let err = leaseq_sqlite::SqliteBackend::connect(&common::url(&in_nowhere), common::options())
        .await
        .expect_err("a file in a missing directory was opened");
    assert!(err.to_string().contains("does not exist"), "{err}");
    drop(common::open(&path).await);
    leaseq_sqlite::SqliteBackend::connect(&common::url(&path), options)
        .await
        .expect("a migrated file opens without migrations");
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("junk.db");
    std::fs::write(&path, vec![0x5a; 8192]).expect("write junk");
    let err = leaseq_sqlite::SqliteBackend::connect(&common::url(&path), common::options())
        .await
        .expect_err("junk opened as a database");
    let text = format!("{err}: {:?}", std::error::Error::source(&err));
    assert!(
        text.contains("sqlite") && text.contains("not a database"),
        "{text}"
    );
}

#[tokio::test]
async fn reopening_a_file_keeps_its_items_and_capabilities_follow_the_options() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("jobs.db");
    let q = queue("reopen");
    {
        let b = common::open(&path).await;
        assert!(b.capabilities().durable && b.capabilities().shared);
        b.enqueue(&q, vec![NewItem::new(b"kept".to_vec())])
            .await
            .expect("enqueue");
        b.close().await;
    }
    let b = common::open(&path).await;
    let lease = b
        .claim_one(&q, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("the item survived");
    assert_eq!(lease.payload.as_ref(), b"kept");
    let normal = leaseq_sqlite::SqliteBackend::connect(
        &common::url(&path),
        common::options().durability(leaseq_sqlite::Durability::Normal),
    )
    .await
    .expect("open");
    // `durable` is about a crash of the process, which NORMAL survives too
    // (it may lose the last commits only on power failure).
    assert!(normal.capabilities().durable && normal.capabilities().shared);
    let memory = leaseq_sqlite::SqliteBackend::connect("sqlite::memory:", common::options())
        .await
        .expect("memory");
    assert!(!memory.capabilities().durable && !memory.capabilities().shared);
}

#[tokio::test]
async fn an_enqueue_wakes_a_waiter_at_once() {
    let db = common::TestDb::new().await;
    let q = queue("wake");
    // A poll far longer than the test: only the wake-up can end the wait.
    let b = leaseq_sqlite::SqliteBackend::connect(
        &common::url(&db.path),
        common::options().poll_interval(Duration::from_secs(3600)),
    )
    .await
    .expect("open");
    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move { b.wait_for_work(&q, Duration::from_secs(3600)).await })
    };
    // The waiter is registered once it has been polled; then enqueue
    // through the other handle on the same file.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !waiter.is_finished() {
        assert!(std::time::Instant::now() < deadline, "no wake-up came");
        db.backend
            .enqueue(&q, vec![NewItem::new(b"x".to_vec())])
            .await
            .expect("enqueue");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    waiter.await.expect("the waiter woke");
}

/// Tables gone from under an open backend (a file replaced, a schema
/// dropped): `Error::Rejected`, as the same call fails until the file is
/// migrated again, not a retryable error. (A file that never held the
/// tables is refused at connect with `InvalidInput`.)
#[tokio::test]
async fn missing_tables_are_rejected_not_retried() {
    use leaseq_sqlite::sqlx::{self, Connection};
    let db = common::TestDb::new().await;
    let mut raw = sqlx::SqliteConnection::connect(&common::url(&db.path))
        .await
        .expect("raw connection");
    sqlx::query("DROP TABLE leaseq_items")
        .execute(&mut raw)
        .await
        .expect("drop");
    let err = db.backend.stats(&queue("q")).await.expect_err("no table");
    assert!(
        matches!(err, leaseq_core::Error::Rejected { .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable());
}

/// A file migrated by a newer build (a migration this build does not know)
/// is refused with a clear error when this build opens it.
#[tokio::test]
async fn a_file_from_a_newer_build_is_refused_clearly() {
    let db = common::TestDb::new().await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from a newer build', 1, x'00', 0)",
    )
    .execute(db.backend.pool())
    .await
    .expect("plant a newer migration");
    match leaseq_sqlite::SqliteBackend::connect(&common::url(&db.path), common::options()).await {
        Err(leaseq_core::Error::Rejected { message, .. }) => {
            assert!(
                message.contains("newer leaseq") && message.contains("9999"),
                "{message}"
            );
        }
        other => panic!("expected a clear refusal, got {other:?}"),
    }
}
