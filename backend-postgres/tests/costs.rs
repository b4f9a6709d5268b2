//! Costs that follow the queue, not the table, checked by what the
//! backend does (never by timing): `stats` counts exactly up to its limit
//! and estimates above it; `purge` and `delete_queue` remove one queue's
//! rows among many queues and nothing else (their plans are guarded in
//! `guards.rs`); a row whose attempts already exceed its maximum goes Dead
//! at the claim that meets it instead of being leased.
//!
//! `delete_queue_among_ten_thousand_queues` deletes 1,000 of its 10,000
//! queues by default; `LEASEQ_SCALE_DELETE=10000` deletes them all and
//! `LEASEQ_SCALE_QUEUES` / `LEASEQ_SCALE_PER_QUEUE` change the table. It
//! prints the time per `delete_queue` (a figure, not an assertion).

mod common;

use std::time::{Duration, Instant};

use leaseq_core::{Backend, BackendExt, ClaimSpec, ItemState, NewItem, QueueName, QueueStats};
use leaseq_postgres::PgBackend;
use sqlx::Row;

const LONG: Duration = Duration::from_secs(60);

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A backend in a fresh schema whose `stats` counts exactly up to `exact`.
async fn backend(tag: &str, exact: u64) -> Option<(PgBackend, Schema)> {
    if !common::server_or_skip().await {
        return None;
    }
    let schema = common::fresh_schema(tag);
    let b = PgBackend::connect(
        &common::url(),
        common::options(&schema).stats_exact_up_to(exact),
    )
    .await
    .expect("connect and migrate");
    Some((b, Schema(schema)))
}

/// Drops the schema when it goes.
struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        common::drop_schema_blocking(self.0.clone());
    }
}

/// Inserts `n` Ready rows of `queue` with payloads of `bytes` bytes, by SQL.
async fn insert_ready(b: &PgBackend, schema: &str, queue: &str, n: i64, bytes: i32) {
    sqlx::query(&format!(
        "INSERT INTO \"{schema}\".leaseq_items (queue, state, payload, max_attempts) \
         SELECT $1, 'ready', convert_to(repeat('x', $3), 'UTF8'), 3 \
         FROM generate_series(1, $2)"
    ))
    .bind(queue)
    .bind(n)
    .bind(bytes)
    .execute(b.pool())
    .await
    .expect("insert");
}

#[tokio::test]
async fn stats_count_exactly_up_to_the_limit_and_estimate_above_it() {
    let Some((b, schema)) = backend("cstats", 50).await else {
        return;
    };
    let queue = q("mixed");
    b.enqueue(
        &queue,
        (0..300).map(|i| NewItem::new(format!("r{i}"))).collect(),
    )
    .await
    .expect("enqueue");
    b.enqueue(
        &queue,
        (0..70)
            .map(|i| NewItem::new(format!("s{i}")).delay(Duration::from_secs(3600)))
            .collect(),
    )
    .await
    .expect("enqueue scheduled");
    let claimed = b
        .claim(&queue, ClaimSpec::new(120, LONG).expect("spec"))
        .await
        .expect("claim");
    assert_eq!(claimed.leases.len(), 120);
    for l in &claimed.leases[..60] {
        b.fail(&l.key, "no").await.expect("fail");
    }
    // Every state is over the limit of 50, and the table is far smaller
    // than the sample, so the sample reads every page: the counts are exact.
    let want = QueueStats {
        ready: 180,
        scheduled: 70,
        leased: 60,
        dead: 60,
        paused: false,
        completed: Some(0),
    };
    assert_eq!(b.stats(&queue).await.expect("stats"), want);
    // A queue under the limit in every state is counted exactly too.
    let small = q("small");
    b.enqueue(
        &small,
        (0..7).map(|i| NewItem::new(format!("x{i}"))).collect(),
    )
    .await
    .expect("enqueue");
    let s = b.stats(&small).await.expect("stats");
    assert_eq!((s.ready, s.scheduled, s.leased, s.dead), (7, 0, 0, 0));

    // A table of some 2,000 pages: the sample reads about a tenth of
    // them, and the estimate of a queue that fills most of it is close,
    // and never below what was counted (the limit plus one).
    insert_ready(&b, &schema.0, "big", 60_000, 200).await;
    let s = b.stats(&q("big")).await.expect("stats");
    assert!(
        (42_000..=78_000).contains(&s.ready),
        "estimate of 60,000 Ready items: {s:?}"
    );
    assert_eq!((s.scheduled, s.leased, s.dead), (0, 0, 0));
    // The mixed queue's states, each over the limit, are now estimated
    // from a sample that sees few of their rows: never below the limit
    // plus one, which is what was counted.
    let s = b.stats(&queue).await.expect("stats");
    assert!(
        [s.ready, s.scheduled, s.leased, s.dead]
            .iter()
            .all(|&n| (51..=2_000).contains(&n)),
        "{s:?}"
    );
    assert_eq!(
        b.stats(&small).await.expect("stats").ready,
        7,
        "a small queue in a big table is counted, not estimated"
    );
}

#[tokio::test]
async fn delete_queue_among_ten_thousand_queues() {
    let queues = env_or("LEASEQ_SCALE_QUEUES", 10_000);
    let per = env_or("LEASEQ_SCALE_PER_QUEUE", 10);
    let delete = env_or("LEASEQ_SCALE_DELETE", 1_000).min(queues);
    let Some((b, schema)) = backend("cdelete", 10_000).await else {
        return;
    };
    let t = format!("\"{}\".leaseq_items", schema.0);
    let start = Instant::now();
    sqlx::query(&format!(
        "INSERT INTO {t} (queue, state, payload, max_attempts) \
         SELECT 'q' || (n % $1), 'ready', convert_to('item ' || n, 'UTF8'), 3 \
         FROM generate_series(0, $2 - 1) n"
    ))
    .bind(i64::try_from(queues).expect("fits"))
    .bind(i64::try_from(queues * per).expect("fits"))
    .execute(b.pool())
    .await
    .expect("fill");
    sqlx::query(&format!("ANALYZE {t}"))
        .execute(b.pool())
        .await
        .expect("analyze");
    println!(
        "{queues} queues of {per} items filled in {:?}",
        start.elapsed()
    );
    let admin = b.admin().expect("admin");
    // One queue of each kind of call: purge keeps the queue's limits,
    // delete_queue drops everything; both remove exactly the queue's rows.
    assert_eq!(admin.purge(&q("q0")).await.expect("purge"), per);
    let start = Instant::now();
    for i in 1..delete {
        let name = q(&format!("q{i}"));
        assert_eq!(admin.delete_queue(&name).await.expect("delete"), per);
    }
    let took = start.elapsed();
    println!(
        "delete_queue of {} queues of {per} among {queues}: {took:?} ({:?} each)",
        delete - 1,
        took / u32::try_from(delete.max(2) - 1).expect("fits")
    );
    let left: i64 = sqlx::query(&format!("SELECT count(*) FROM {t}"))
        .fetch_one(b.pool())
        .await
        .expect("count")
        .get(0);
    assert_eq!(
        u64::try_from(left).expect("count"),
        (queues - delete) * per,
        "only the deleted queues' rows went"
    );
    assert_eq!(
        b.stats(&q("q1")).await.expect("stats"),
        QueueStats {
            completed: Some(0),
            ..QueueStats::default()
        }
    );
    if delete < queues {
        let kept = q(&format!("q{delete}"));
        assert_eq!(b.stats(&kept).await.expect("stats").ready, per);
    }
}

#[tokio::test]
async fn attempts_beyond_the_maximum_go_dead_at_the_claim() {
    let Some((b, schema)) = backend("cbeyond", 10_000).await else {
        return;
    };
    let queue = q("beyond");
    let ids: Vec<_> = b
        .enqueue(
            &queue,
            vec![
                NewItem::new("over").max_attempts(3).priority(9),
                NewItem::new("due")
                    .max_attempts(3)
                    .priority(8)
                    .delay(Duration::from_secs(3600)),
                NewItem::new("healthy").max_attempts(3),
            ],
        )
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    // Attempt 51 of 3 at the head of the Ready index, and 3 of 3 on a due
    // Scheduled item: both were written around the backend.
    let t = format!("\"{}\".leaseq_items", schema.0);
    for (id, attempts) in [(ids[0], 50), (ids[1], 3)] {
        sqlx::query(&format!(
            "UPDATE {t} SET attempts = $2, available_at = now() - interval '1 second' WHERE id = $1"
        ))
        .bind(i64::try_from(id.get()).expect("id"))
        .bind(attempts)
        .execute(b.pool())
        .await
        .expect("plant");
    }
    let claimed = b
        .claim(&queue, ClaimSpec::new(3, LONG).expect("spec"))
        .await
        .expect("claim");
    let got: Vec<_> = claimed
        .leases
        .iter()
        .map(|l| (l.id(), l.attempts))
        .collect();
    assert_eq!(got, vec![(ids[2], 1)], "only the healthy item is leased");
    let mut repaired: Vec<_> = claimed.repairs.iter().map(|r| (r.id, r.index)).collect();
    repaired.sort();
    assert_eq!(
        repaired,
        vec![(ids[0], ItemState::Ready), (ids[1], ItemState::Scheduled)]
    );
    assert!(
        claimed
            .repairs
            .iter()
            .any(|r| r.problem.contains("50 of 3")),
        "{:?}",
        claimed.repairs
    );
    for (id, attempts) in [(ids[0], 50u32), (ids[1], 3)] {
        let info = b.item(&queue, id).await.expect("kept");
        assert_eq!(info.state, ItemState::Dead);
        assert_eq!(info.attempts, attempts, "no attempt added");
        assert_eq!(info.last_error.as_deref(), Some("attempts exhausted"));
    }
    let s = b.stats(&queue).await.expect("stats");
    assert_eq!((s.ready, s.scheduled, s.leased, s.dead), (0, 0, 1, 2));
    // A second claim finds nothing, and moves nothing.
    let again = b
        .claim(&queue, ClaimSpec::new(3, LONG).expect("spec"))
        .await
        .expect("claim");
    assert!(again.leases.is_empty() && again.repairs.is_empty());
}

/// The planner's row count for the items table after a `VACUUM` of an
/// almost empty table stays at about one row while a burst fills it; the
/// reaper sees it far below the live rows and analyzes the table (claims
/// would otherwise read and sort the whole Ready set each time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_planner_count_is_analyzed_by_the_reaper() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("cplan");
    let b = PgBackend::connect(
        &common::url(),
        common::options(&schema).planner_check(Duration::ZERO),
    )
    .await
    .expect("connect and migrate");
    let _drop = Schema(schema.clone());
    let table = format!("\"{schema}\".leaseq_items");
    let believed = |b: &PgBackend| {
        let table = table.clone();
        let pool = b.pool().clone();
        async move {
            let row =
                sqlx::query("SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass($1)")
                    .bind(&table)
                    .fetch_one(&pool)
                    .await
                    .expect("reltuples");
            row.get::<f64, _>(0)
        }
    };
    b.enqueue(&q("other"), vec![NewItem::new("one")])
        .await
        .expect("enqueue");
    sqlx::query(&format!("VACUUM {table}"))
        .execute(b.pool())
        .await
        .expect("vacuum");
    let burst = q("burst");
    insert_ready(&b, &schema, "burst", 20_000, 16).await;
    assert!(
        believed(&b).await < 100.0,
        "the VACUUM left a count of about one row"
    );
    // The server's statistics learn of the rows within seconds; the
    // reaper looks at every reap here.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        b.reap(&burst).await.expect("reap");
        if believed(&b).await >= 10_000.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the planner still believes {} rows among 20,001",
            believed(&b).await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The server's count of dead rows in `table`, and when it was last
/// vacuumed by hand (not by autovacuum), as seconds since the epoch.
async fn dead_and_vacuumed(b: &PgBackend, table: &str) -> (i64, Option<f64>) {
    let row = sqlx::query(
        "SELECT coalesce(n_dead_tup, 0), extract(epoch FROM last_vacuum)::float8 \
         FROM pg_stat_user_tables WHERE relid = to_regclass($1)",
    )
    .bind(table)
    .fetch_one(b.pool())
    .await
    .expect("table statistics");
    (row.get(0), row.get(1))
}

/// Claims and acks every Ready item of `queue`, 1,000 at a time.
async fn drain(b: &PgBackend, queue: &QueueName) {
    loop {
        let got = b
            .claim(queue, ClaimSpec::new(1_000, LONG).expect("spec"))
            .await
            .expect("claim");
        if got.leases.is_empty() {
            return;
        }
        let keys: Vec<_> = got.leases.iter().map(|l| l.key.clone()).collect();
        for r in b.ack_many(&keys).await.expect("ack_many") {
            r.expect("ack");
        }
    }
}

/// Each claim and ack leaves dead rows (and dead entries at the head of
/// the Ready index, which every claim walks). Past `vacuum_after` the
/// reaper vacuums the table; with it off, it never does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_rows_are_vacuumed_by_the_reaper_past_the_bound() {
    if !common::server_or_skip().await {
        return;
    }
    let schema = common::fresh_schema("cvac");
    let off = PgBackend::connect(
        &common::url(),
        common::options(&schema)
            .planner_check(Duration::ZERO)
            .vacuum_after(None),
    )
    .await
    .expect("connect and migrate");
    let _drop = Schema(schema.clone());
    let table = format!("\"{schema}\".leaseq_items");
    let churn = q("churn");
    insert_ready(&off, &schema, "churn", 3_000, 16).await;
    drain(&off, &churn).await;
    // The server's statistics learn of the dead rows within seconds.
    let deadline = Instant::now() + Duration::from_secs(30);
    while dead_and_vacuumed(&off, &table).await.0 < 3_000 {
        assert!(Instant::now() < deadline, "no dead rows counted");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for _ in 0..5 {
        off.reap(&churn).await.expect("reap");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        dead_and_vacuumed(&off, &table).await.1,
        None,
        "vacuum_after(None) vacuumed the table"
    );

    let on = PgBackend::connect(
        &common::url(),
        common::options(&schema)
            .planner_check(Duration::ZERO)
            .vacuum_after(Some(1_000)),
    )
    .await
    .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        on.reap(&churn).await.expect("reap");
        let (dead, vacuumed) = dead_and_vacuumed(&on, &table).await;
        if vacuumed.is_some() && dead < 1_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{dead} dead rows, last vacuum {vacuumed:?}: the reaper did not vacuum past 1,000"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The queue still works after the vacuum.
    on.enqueue(&churn, vec![NewItem::new("after")])
        .await
        .expect("enqueue");
    drain(&on, &churn).await;
}
