//! PostgreSQL faults during a storm of a producer and two workers (each on
//! a pool of its own, like two processes) whose sessions run with a 300 ms
//! `statement_timeout`: another session locks the queue table past that
//! timeout, so claims, acks and enqueues time out mid-statement (twice);
//! the sessions waiting on the lock inside a claim are terminated with
//! `pg_terminate_backend`; and every session of the pools is terminated.
//! After each fault the workers resume by themselves and the indexes are
//! consistent (INV-1); in the end every item whose enqueue returned Ok was
//! acked exactly once. Isolated in a schema of its own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, QueueName};
use leaseq_postgres::PgBackend;
use leaseq_reliability::env;
use leaseq_reliability::factories::{drop_schema_blocking, fresh_schema, PgFactory};
use leaseq_reliability::storm::{indexes_consistent, Storm, StormConfig};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

const RESUMED: u64 = 40;
const RESUME_LIMIT: Duration = Duration::from_secs(15);
/// How long a fault holds the table: several statement timeouts.
const HOLD: Duration = Duration::from_millis(1_500);

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The table is locked past the statement timeout.
    LockPastTimeout,
    /// The table is locked and the sessions waiting on it are terminated.
    TerminateWaiting,
    /// Every session of the pools is terminated.
    TerminateAll,
}

const SCHEDULE: [Fault; 4] = [
    Fault::LockPastTimeout,
    Fault::TerminateWaiting,
    Fault::TerminateAll,
    Fault::LockPastTimeout,
];

struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        drop_schema_blocking(self.0.clone());
    }
}

async fn admin() -> PgConnection {
    PgConnection::connect(&env::database_url())
        .await
        .expect("admin session")
}

/// Terminates the sessions of `app` (only those waiting on a lock when
/// `waiting`); returns how many.
async fn terminate(app: &str, waiting: bool) -> i64 {
    let mut c = admin().await;
    let sql = format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = $1 AND pid <> pg_backend_pid() {}",
        if waiting {
            "AND wait_event_type = 'Lock'"
        } else {
            ""
        }
    );
    let n: i64 = sqlx::query_scalar(&sql)
        .bind(app)
        .fetch_one(&mut c)
        .await
        .expect("terminate");
    let _ = c.close().await;
    n
}

async fn waiting_on_lock(app: &str) -> i64 {
    let mut c = admin().await;
    let n: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE application_name = $1 AND wait_event_type = 'Lock'",
    )
    .bind(app)
    .fetch_one(&mut c)
    .await
    .expect("pg_stat_activity");
    let _ = c.close().await;
    n
}

async fn inject(fault: Fault, schema: &str, app: &str, storm: &Storm) -> String {
    if let Fault::TerminateAll = fault {
        let n = terminate(app, false).await;
        assert!(n > 0, "no session of the pools was found");
        return format!("{n} sessions terminated");
    }
    let mut locker = admin().await;
    sqlx::query("BEGIN")
        .execute(&mut locker)
        .await
        .expect("begin");
    sqlx::query(&format!(
        "LOCK TABLE \"{schema}\".leaseq_items IN ACCESS EXCLUSIVE MODE"
    ))
    .execute(&mut locker)
    .await
    .expect("lock");
    let before = storm.failures();
    let start = Instant::now();
    let mut note = String::new();
    match fault {
        Fault::LockPastTimeout => {
            // Held past several timeouts; the calls that met it failed.
            while start.elapsed() < HOLD || storm.failures() == before {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "no call timed out"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            note = format!("{} calls timed out", storm.failures() - before);
        }
        Fault::TerminateWaiting => {
            while waiting_on_lock(app).await == 0 {
                assert!(start.elapsed() < Duration::from_secs(20), "nobody waited");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let n = terminate(app, true).await;
            note = format!("{n} sessions terminated while waiting inside a statement");
        }
        Fault::TerminateAll => {}
    }
    sqlx::query("COMMIT")
        .execute(&mut locker)
        .await
        .expect("commit");
    let _ = locker.close().await;
    note
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_survives_timeouts_and_terminations() {
    let url = env::database_url();
    if let Err(e) = PgConnection::connect(&url).await {
        return env::skip(&format!("no PostgreSQL at {url}"), e);
    }
    let schema = Schema(fresh_schema("faults"));
    let app = format!("leaseq-rel-{}", env::tag());
    let connect: PgConnectOptions = url.parse().expect("url");
    let timed = connect.options([("statement_timeout", "300ms")]);
    let pool = || async {
        let b = PgBackend::connect_with(
            timed.clone(),
            PgFactory::options(&schema.0).application_name(&app),
        )
        .await
        .expect("connect");
        Arc::new(b) as Arc<dyn Backend>
    };
    let producer = pool().await;
    let workers = vec![pool().await, pool().await];
    let observer = PgBackend::connect(&url, PgFactory::options(&schema.0))
        .await
        .expect("observer");
    let q = QueueName::new("storm").expect("name");
    let storm = Storm::start(vec![producer], workers, q.clone(), StormConfig::default())
        .expect("workers build");
    storm
        .progress(RESUMED, Duration::from_secs(30))
        .await
        .expect("the storm gets going");
    let mut log = Vec::new();
    for fault in SCHEDULE {
        let note = inject(fault, &schema.0, &app, &storm).await;
        let took = storm
            .progress(RESUMED, RESUME_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("after {fault:?}: {e}"));
        indexes_consistent(&observer, &q, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("after {fault:?}: {e}"));
        log.push(format!(
            "{fault:?} ({note}): resumed after {}ms",
            took.as_millis()
        ));
    }
    let failures = storm.failures();
    let summary = storm
        .finish(&observer, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("postgres: {e}"));
    indexes_consistent(&observer, &q, Duration::from_secs(10))
        .await
        .expect("indexes at the end");
    println!(
        "postgres: {}; {failures} failed calls; {summary}",
        log.join("; ")
    );
}
