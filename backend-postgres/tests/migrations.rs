//! Migrations: idempotent, safe to run from several processes at once, and
//! confined to the configured schema.

mod common;

use leaseq_core::{Backend, BackendExt, QueueName};
use leaseq_postgres::PgBackend;
use sqlx::{Connection, PgConnection};

async fn applied(schema: &str) -> i64 {
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    let sql = format!("SELECT count(*) FROM \"{schema}\"._sqlx_migrations WHERE success");
    let n: i64 = sqlx::query_scalar(&sql)
        .fetch_one(&mut c)
        .await
        .expect("count");
    let _ = c.close().await;
    n
}

/// How many migrations the crate embeds.
fn migrations() -> i64 {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
    let n = std::fs::read_dir(dir)
        .expect("migrations directory")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".sql"))
        })
        .count();
    i64::try_from(n).expect("count")
}

#[tokio::test]
async fn migrating_twice_is_a_no_op() {
    let Some(db) = common::TestDb::new("mig2").await else {
        return;
    };
    let queue = QueueName::new("q").expect("name");
    db.backend.push(&queue, "kept").await.expect("push");
    let before = applied(&db.schema).await;
    assert_eq!(before, migrations());
    db.backend.migrate().await.expect("second migrate");
    db.backend.migrate().await.expect("third migrate");
    assert_eq!(applied(&db.schema).await, before);
    assert_eq!(
        db.backend.stats(&queue).await.expect("stats").ready,
        1,
        "data survives"
    );
}

#[tokio::test]
async fn concurrent_migrations_of_one_schema_all_succeed() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("migc");
    // Separate pools, as separate processes would have.
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let schema = schema.clone();
            tokio::spawn(async move {
                PgBackend::connect(&common::url(), common::options(&schema)).await
            })
        })
        .collect();
    let mut backends = Vec::new();
    for t in tasks {
        backends.push(
            t.await
                .expect("join")
                .expect("every concurrent migration succeeds"),
        );
    }
    let queue = QueueName::new("q").expect("name");
    let id = backends[0].push(&queue, "x").await.expect("push");
    assert_eq!(
        backends[3].item(&queue, id).await.expect("item").payload,
        "x"
    );
    assert_eq!(applied(&schema).await, migrations());
    drop(backends);
    common::drop_schema(&schema).await;
}

#[tokio::test]
async fn two_schemas_in_one_database_do_not_see_each_other() {
    let Some(a) = common::TestDb::new("appa").await else {
        return;
    };
    let Some(b) = common::TestDb::new("appb").await else {
        return;
    };
    let queue = QueueName::new("shared-name").expect("name");
    a.backend.push(&queue, "for a").await.expect("push");
    assert_eq!(b.backend.stats(&queue).await.expect("stats").total(), 0);
    assert!(b
        .backend
        .claim_one(&queue, std::time::Duration::from_secs(5))
        .await
        .expect("claim")
        .is_none());
    assert_eq!(a.backend.stats(&queue).await.expect("stats").ready, 1);
}

#[tokio::test]
async fn without_migrations_operations_are_rejected_until_migrated() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("nomig");
    let b = PgBackend::connect(
        &common::url(),
        common::options(&schema).migrate_on_connect(false),
    )
    .await
    .expect("connect");
    let queue = QueueName::new("q").expect("name");
    let err = b.push(&queue, "x").await.expect_err("no table yet");
    // A missing table is no passing failure: resending cannot help.
    assert!(
        matches!(err, leaseq_core::Error::Rejected { .. }),
        "{err:?}"
    );
    assert!(!err.is_retryable(), "{err:?}");
    b.migrate().await.expect("migrate");
    b.push(&queue, "x").await.expect("push after migrate");
    drop(b);
    common::drop_schema(&schema).await;
}

#[tokio::test]
async fn bad_urls_and_schemas_are_typed_errors() {
    let bad_schema = PgBackend::connect(&common::url(), common::options("Bad-Name")).await;
    assert!(matches!(
        bad_schema,
        Err(leaseq_core::Error::InvalidInput { .. })
    ));
    let bad_url = PgBackend::connect("not a url", common::options("fine")).await;
    assert!(matches!(
        bad_url,
        Err(leaseq_core::Error::InvalidInput { .. })
    ));
    let opts = common::options("unreachable").acquire_timeout(std::time::Duration::from_secs(2));
    let nowhere = PgBackend::connect("postgres://postgres@127.0.0.1:1/test", opts).await;
    assert!(
        matches!(nowhere, Err(leaseq_core::Error::Unavailable { .. })),
        "{nowhere:?}"
    );
}

/// A schema migrated by a newer build (a migration this build does not
/// know) is refused with a clear error, and this build changes nothing.
#[tokio::test]
async fn a_schema_from_a_newer_build_is_refused_clearly() {
    let Some(db) = common::TestDb::new("mignew").await else {
        return;
    };
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    sqlx::query(&format!(
        "INSERT INTO \"{}\"._sqlx_migrations \
           (version, description, success, checksum, execution_time) \
         VALUES (9999, 'from a newer build', true, '\\x00'::bytea, 0)",
        db.schema
    ))
    .execute(&mut c)
    .await
    .expect("plant a newer migration");
    let _ = c.close().await;
    match db.backend.migrate().await {
        Err(leaseq_core::Error::Rejected { message, .. }) => {
            assert!(
                message.contains("newer leaseq") && message.contains("9999"),
                "{message}"
            );
        }
        other => panic!("expected a clear refusal, got {other:?}"),
    }
    assert_eq!(applied(&db.schema).await, migrations() + 1);
}
