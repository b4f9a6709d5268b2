//! Fault storms on a private PostgreSQL server (run as the `postgres`
//! user in a temp dir on a free port): settled producers (`enqueue_once`
//! under a request id per batch, sent again until answered), two real
//! workers and their reapers, each on a pool of its own, judged by a
//! per-id ledger that also checks that no id names two payloads.
//!
//! Faults all through the storm: every session runs with
//! `idle_session_timeout` and `idle_in_transaction_session_timeout`, so the
//! server ends pooled connections that sit idle; the workers' pools hold
//! two connections for four handler slots and give up waiting for one
//! after 300 ms (a full pool); the producers' sessions have a 300 ms
//! `statement_timeout` and the workers' a 150 ms `lock_timeout`.
//!
//! Faults in turn: the queue table locked past those timeouts; every
//! session of the pools ended with `pg_terminate_backend`; the server at
//! its `max_connections` (other sessions hold every slot) while the idle
//! timeouts end the pools' connections; and an immediate-mode restart
//! (every backend killed, crash recovery). The reapers vacuum the queue's
//! table all through (`PgOptions::vacuum_after` set low), and must have
//! vacuumed since the restart. After each the storm resumes by
//! itself and the indexes are consistent; in the end every item whose
//! enqueue returned Ok was acked exactly once (or Dead), nothing ran after
//! its ack, and no batch was written twice.
//!
//! An operated storm (no faults) adds an operator who cancels items and
//! pauses and resumes the queue at random
//! (`leaseq_reliability::operated`).
//!
//! `LEASEQ_STORM_SECS=N` holds each fault longer, with N seconds of storm
//! between faults (and runs the operated storm N seconds).

use std::sync::Arc;
use std::time::{Duration, Instant};

use leaseq_core::{Backend, QueueName};
use leaseq_postgres::{PgBackend, PgOptions};
use leaseq_reliability::env;
use leaseq_reliability::operated::{operated_storm, Handles};
use leaseq_reliability::storm::{indexes_consistent, Storm, StormConfig};
use leaseq_testkit::pg_server::PrivatePostgres;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

const RESUMED: u64 = 40;
const RESUME_LIMIT: Duration = Duration::from_secs(30);
const APP: &str = "leaseq-storm";
/// The schema every handle of the storm uses.
const SCHEMA: &str = "storm";
/// Ends every session of the pools.
const TERMINATE: &str = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                         WHERE application_name = $1 AND pid <> pg_backend_pid()";

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// The queue table locked past the statement and lock timeouts.
    Lock,
    /// Every session of the pools terminated.
    TerminateAll,
    /// Other sessions hold every connection slot.
    ServerFull,
    /// `pg_ctl -m immediate` stop, then start.
    ImmediateRestart,
}

const SCHEDULE: [Fault; 5] = [
    Fault::Lock,
    Fault::TerminateAll,
    Fault::ServerFull,
    Fault::ImmediateRestart,
    Fault::Lock,
];

fn pace() -> (Duration, Duration) {
    match env::number("LEASEQ_STORM_SECS", 0) {
        0 => (Duration::from_millis(500), Duration::from_millis(1_500)),
        n => (Duration::from_secs(n), Duration::from_secs(6)),
    }
}

async fn admin(url: &str) -> PgConnection {
    PgConnection::connect(url).await.expect("admin session")
}

/// The number `sql` answers with `arg` as its `$1`, on an admin session.
async fn scalar(url: &str, sql: &str, arg: &str) -> i64 {
    let mut c = admin(url).await;
    let n: i64 = sqlx::query_scalar(sql)
        .bind(arg)
        .fetch_one(&mut c)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let _ = c.close().await;
    n
}

async fn inject(server: &mut PrivatePostgres, fault: Fault, storm: &Storm) -> String {
    let url = server.url("");
    let (_, hold) = pace();
    let before = storm.failures();
    match fault {
        Fault::Lock => {
            let mut locker = admin(&url).await;
            sqlx::query("BEGIN")
                .execute(&mut locker)
                .await
                .expect("begin");
            sqlx::query("LOCK TABLE storm.leaseq_items IN ACCESS EXCLUSIVE MODE")
                .execute(&mut locker)
                .await
                .expect("lock");
            let start = Instant::now();
            while start.elapsed() < hold || storm.failures() == before {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "no call timed out"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            sqlx::query("COMMIT")
                .execute(&mut locker)
                .await
                .expect("commit");
            let _ = locker.close().await;
            format!("{} calls failed", storm.failures() - before)
        }
        Fault::TerminateAll => {
            let n = scalar(&url, TERMINATE, APP).await;
            format!("{n} sessions terminated")
        }
        Fault::ServerFull => {
            let mut hogs = Vec::new();
            let start = Instant::now();
            // Every slot taken (bounded: 64 sessions), the pools' sessions
            // ended, and the slots they leave taken too, so the pools
            // cannot reconnect until the hogs go.
            let mut terminated = 0;
            while start.elapsed() < hold * 2 {
                while hogs.len() < 64 {
                    match PgConnection::connect(&url).await {
                        Ok(c) => hogs.push(c),
                        Err(_) => break,
                    }
                }
                if terminated == 0 {
                    if let Some(c) = hogs.first_mut() {
                        terminated = sqlx::query_scalar::<_, i64>(TERMINATE)
                            .bind(APP)
                            .fetch_one(c)
                            .await
                            .expect("terminate");
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let held = hogs.len();
            for c in hogs {
                let _ = c.close().await;
            }
            format!(
                "{held} slots held {}ms, {terminated} sessions terminated, {} calls failed",
                (hold * 2).as_millis(),
                storm.failures() - before
            )
        }
        Fault::ImmediateRestart => {
            tokio::task::block_in_place(|| server.restart_immediate()).expect("restart");
            "immediate restart".into()
        }
    }
}

async fn pool(url: &str, opts: &[(&str, &str)], options: PgOptions) -> Arc<dyn Backend> {
    let connect: PgConnectOptions = url.parse().expect("url");
    let connect = connect.options(opts.iter().copied());
    Arc::new(
        PgBackend::connect_with(connect, options)
            .await
            .expect("connect"),
    )
}

/// The reapers look at the tables every 250 ms and vacuum past 100 dead
/// rows, so vacuums run all through the storm and meet every fault.
fn options() -> PgOptions {
    PgOptions::new()
        .test_hooks(true)
        .schema(SCHEMA)
        .application_name(APP)
        .poll_interval(Duration::from_millis(200))
        .planner_check(Duration::from_millis(250))
        .vacuum_after(Some(100))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_survives_restarts_timeouts_terminations_and_full_pools() {
    let mut server = match PrivatePostgres::start() {
        Ok(s) => s,
        Err(e) => return env::skip("a private PostgreSQL server", e),
    };
    let url = server.url("");
    let idle = [
        ("idle_session_timeout", "400ms"),
        ("idle_in_transaction_session_timeout", "200ms"),
    ];
    let producer_opts = [idle[0], idle[1], ("statement_timeout", "300ms")];
    let worker_opts = [
        idle[0],
        idle[1],
        ("lock_timeout", "150ms"),
        ("statement_timeout", "2s"),
    ];
    let producer_pool = || {
        pool(
            &url,
            &producer_opts,
            options()
                .max_connections(2)
                .acquire_timeout(Duration::from_secs(2)),
        )
    };
    let worker_pool = || {
        pool(
            &url,
            &worker_opts,
            options()
                .max_connections(2)
                .acquire_timeout(Duration::from_millis(300)),
        )
    };
    let producers = vec![producer_pool().await, producer_pool().await];
    let workers = vec![worker_pool().await, worker_pool().await];
    let observer = PgBackend::connect(
        &url,
        PgOptions::new()
            .test_hooks(true)
            .schema(SCHEMA)
            .max_connections(2),
    )
    .await
    .expect("observer");
    let q = QueueName::new("storm").expect("name");
    let cfg = StormConfig {
        settled: true,
        work: Duration::from_millis(5),
        long_work: Duration::from_millis(2_500),
        max_backlog: 400,
        ..StormConfig::default()
    };
    let storm = Storm::start(producers, workers, q.clone(), cfg).expect("workers build");
    storm
        .progress(RESUMED, Duration::from_secs(30))
        .await
        .expect("the storm gets going");
    let (between, _) = pace();
    let mut log = Vec::new();
    for fault in SCHEDULE {
        tokio::time::sleep(between).await;
        let note = inject(&mut server, fault, &storm).await;
        let took = storm
            .progress(RESUMED, RESUME_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("after {fault:?} ({note}): {e}"));
        indexes_consistent(&observer, &q, Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("after {fault:?}: {e}"));
        storm
            .ledger
            .interim()
            .unwrap_or_else(|e| panic!("after {fault:?}: {e}"));
        log.push(format!(
            "{fault:?} ({note}): resumed in {}ms",
            took.as_millis()
        ));
    }
    let failures = storm.failures();
    let end = storm
        .settle(&observer, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("postgres: {e}"));
    // Statistics restart with the server: these are the vacuums since the
    // immediate restart (the Lock fault and the settling after it).
    let vacuums = scalar(
        &url,
        "SELECT coalesce(sum(vacuum_count), 0)::int8 FROM pg_stat_user_tables \
         WHERE schemaname = $1 AND relname = 'leaseq_items'",
        SCHEMA,
    )
    .await;
    let verdict = format!(
        "postgres: {}; {failures} failed calls; {vacuums} vacuums by the reapers since the restart; {}",
        log.join("; "),
        end.figures
    );
    assert!(vacuums > 0, "{verdict}: the reapers never vacuumed");
    env::loud(&verdict);
    indexes_consistent(&observer, &q, Duration::from_secs(10))
        .await
        .expect("indexes at the end");
    end.assert_nothing_lost(&verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_operator_cancels_pauses_and_resumes_without_losing_an_item() {
    let server = match PrivatePostgres::start() {
        Ok(s) => s,
        Err(e) => return env::skip("a private PostgreSQL server", e),
    };
    let url = server.url("");
    let pool = || pool(&url, &[], options().max_connections(2));
    let handles = Handles {
        producers: vec![pool().await, pool().await],
        workers: vec![pool().await, pool().await],
        operator: pool().await,
        observer: pool().await,
    };
    let q = QueueName::new("operated").expect("name");
    operated_storm("postgres", handles, q, Duration::from_secs(10)).await;
}
