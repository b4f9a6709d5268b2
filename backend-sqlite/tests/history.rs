//! What is SQLite's own in the History group (the shared checks are in the
//! conformance suite): a removal keeps nothing and trims nothing, a
//! cancel-requested lease that a release ends is kept as it was, a purge of
//! leased items leaves no kept rows or counts behind, a second handle on
//! the file in this process is woken by an ending, and (ignored) the
//! retention-cost measurement.

mod common;

use std::time::{Duration, Instant};

use leaseq_core::{
    Admin, Backend, BackendExt, Bytes, Control, Ending, History, Keep, NewItem, QueueName,
    Retention,
};
use leaseq_sqlite::sqlx;

const TTL: Duration = Duration::from_secs(60);

fn queue(name: &str) -> QueueName {
    QueueName::new(name).expect("queue name")
}

fn history(b: &leaseq_sqlite::SqliteBackend) -> &dyn History {
    b.history().expect("the History group")
}

/// The kept counters of `queue`'s policy row: (completed, cancelled).
async fn counters(db: &common::TestDb, q: &QueueName) -> (i64, i64) {
    sqlx::query_as("SELECT completed_kept, cancelled_kept FROM leaseq_retention WHERE queue = ?1")
        .bind(q.as_str())
        .fetch_one(db.backend.pool())
        .await
        .expect("read the counters")
}

#[tokio::test]
async fn removing_a_leased_item_keeps_nothing_and_trims_nothing() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("removed");
    history(b)
        .set_retention(&q, Retention::default().completed(Keep::count(1)))
        .await
        .expect("set_retention");
    b.enqueue(&q, vec![NewItem::new("a"), NewItem::new("b")])
        .await
        .expect("enqueue");
    let first = b.claim_one(&q, TTL).await.expect("claim").expect("a lease");
    b.ack(&first.key).await.expect("ack");
    let second = b.claim_one(&q, TTL).await.expect("claim").expect("a lease");
    let was = b.remove_item(&q, second.id()).await.expect("remove_item");
    assert_eq!(was, leaseq_core::ItemState::Leased);
    let kept = history(b).finished(&q, None, 10).await.expect("finished");
    let ids: Vec<_> = kept.iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        vec![first.id()],
        "the removal was kept or trimmed the kept item"
    );
    assert_eq!(counters(&db, &q).await, (1, 0));
}

#[tokio::test]
async fn a_released_cancel_requested_lease_is_kept_as_it_was() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("released");
    history(b)
        .set_retention(&q, Retention::default().cancelled(Keep::FOREVER))
        .await
        .expect("set_retention");
    b.enqueue(
        &q,
        vec![NewItem::new("a").max_attempts(1), NewItem::new("b")],
    )
    .await
    .expect("enqueue");
    let leases = b.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    assert_eq!(leases.len(), 2);
    for l in &leases {
        b.cancel(&q, l.id()).await.expect("cancel");
    }
    // Exhausted: the release would write "attempts exhausted"; and a
    // give_back would take the attempt back. The record shows neither.
    b.release(&leases[0].key, Duration::ZERO)
        .await
        .expect("release");
    b.give_back(&leases[1].key).await.expect("give_back");
    for l in &leases {
        let f = history(b).finished_item(&q, l.id()).await.expect("kept");
        assert_eq!(
            (f.ending, f.attempts, f.last_error.as_deref()),
            (Ending::Cancelled, 1, None),
            "{f:?}"
        );
    }
    assert_eq!(counters(&db, &q).await, (0, 2));
}

#[tokio::test]
async fn a_purge_of_leased_items_leaves_no_kept_rows_or_counts() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("purged");
    history(b)
        .set_retention(&q, Retention::default().completed(Keep::FOREVER))
        .await
        .expect("set_retention");
    b.enqueue(
        &q,
        vec![NewItem::new("a"), NewItem::new("b"), NewItem::new("c")],
    )
    .await
    .expect("enqueue");
    let leases = b.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    b.ack(&leases[0].key).await.expect("ack");
    assert_eq!(b.purge(&q).await.expect("purge"), 2);
    assert!(history(b)
        .finished(&q, None, 10)
        .await
        .expect("finished")
        .is_empty());
    assert_eq!(counters(&db, &q).await, (0, 0));
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM leaseq_finished")
        .fetch_one(b.pool())
        .await
        .expect("count");
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn an_ending_wakes_a_waiter_on_another_handle_to_the_file() {
    let db = common::TestDb::new().await;
    let other = common::open(&db.path).await;
    let q = queue("woken");
    history(&db.backend)
        .set_retention(&q, Retention::default().completed(Keep::count(5)))
        .await
        .expect("set_retention");
    let mut signal = history(&other)
        .finished_signal(&q)
        .await
        .expect("subscribe");
    let id = db
        .backend
        .enqueue(&q, vec![NewItem::new("x")])
        .await
        .expect("enqueue")[0]
        .id;
    let lease = db
        .backend
        .claim_one(&q, TTL)
        .await
        .expect("claim")
        .expect("a lease");
    history(&db.backend)
        .complete(&lease.key, Bytes::from_static(b"done"))
        .await
        .expect("complete");
    // Far longer than any wake-up takes; the poll interval is not involved.
    tokio::time::timeout(Duration::from_secs(10), signal.changed())
        .await
        .expect("the signal fired");
    let f = history(&other).finished_item(&q, id).await.expect("kept");
    assert_eq!(f.result.as_deref(), Some(b"done".as_slice()));
}

/// The retention-cost figure: the median time of a `collect` that removes
/// nothing, with 10 and with 100,000 kept unexpired items (a day's age
/// bound). Prints the figures; asserts only that nothing was removed.
/// `cargo test -p leaseq-sqlite --release --test history -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn collect_cost_with_10_and_100000_kept() {
    const RUNS: usize = 201;
    let db = common::TestDb::new().await;
    let b = &db.backend;
    for kept in [10usize, 100_000] {
        let q = queue(&format!("cost-{kept}"));
        history(b)
            .set_retention(
                &q,
                Retention::default().completed(Keep::for_age(Duration::from_secs(86_400))),
            )
            .await
            .expect("set_retention");
        let mut left = kept;
        while left > 0 {
            let n = left.min(1000);
            let items = (0..n).map(|i| NewItem::new(format!("item {i}"))).collect();
            b.enqueue(&q, items).await.expect("enqueue");
            let max = u32::try_from(n).expect("a batch");
            let leases = b.claim_up_to(&q, max, TTL).await.expect("claim").leases;
            let keys: Vec<_> = leases.iter().map(|l| l.key.clone()).collect();
            for chunk in keys.chunks(100) {
                b.ack_many(chunk).await.expect("ack_many");
            }
            left -= n;
        }
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let t = Instant::now();
            let gone = history(b).collect(&q).await.expect("collect");
            times.push(t.elapsed());
            assert_eq!(gone, 0, "collect removed unexpired items");
        }
        times.sort();
        let listed = history(b).finished(&q, None, 1).await.expect("finished");
        assert_eq!(listed.len(), 1);
        println!(
            "collect with {kept} kept unexpired items: median {:?}, p90 {:?} ({RUNS} runs)",
            times[RUNS / 2],
            times[RUNS * 9 / 10]
        );
    }
}

/// Acks `n` items of `q` one by one; answers the time per ack.
async fn time_acks(b: &leaseq_sqlite::SqliteBackend, q: &QueueName, n: usize) -> Duration {
    let items = (0..n).map(|i| NewItem::new(format!("item {i}"))).collect();
    b.enqueue(q, items).await.expect("enqueue");
    let max = u32::try_from(n).expect("a batch");
    let leases = b.claim_up_to(q, max, TTL).await.expect("claim").leases;
    assert_eq!(leases.len(), n);
    let t = Instant::now();
    for l in &leases {
        b.ack(&l.key).await.expect("ack");
    }
    t.elapsed() / u32::try_from(n).expect("a count")
}

/// A backend on a fresh file with `synchronous=NORMAL`, so a commit waits
/// for no `fsync` and the statement's own cost shows.
async fn unsynced() -> (leaseq_sqlite::SqliteBackend, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let options = common::options().durability(leaseq_sqlite::Durability::Normal);
    let b =
        leaseq_sqlite::SqliteBackend::connect(&common::url(&dir.path().join("jobs.db")), options)
            .await
            .expect("open");
    (b, dir)
}

/// The ack path's cost: per-ack time on a queue with the default policy
/// with the recording trigger (as shipped) and with it dropped (as before
/// migration 0016), and on a queue that keeps completed items, each on a
/// file of its own. Rounds rotate their order so the machine's load falls
/// on each alike; prints medians.
/// `cargo test -p leaseq-sqlite --release --test history -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn ack_cost_with_and_without_the_trigger() {
    const ROUNDS: usize = 41;
    const ACKS: usize = 1000;
    let (before, _a) = unsynced().await;
    let (plain, _b) = unsynced().await;
    let (keeping, _c) = unsynced().await;
    sqlx::query("DROP TRIGGER leaseq_finished_on_ack")
        .execute(before.pool())
        .await
        .expect("drop the trigger");
    let q = queue("acked");
    history(&keeping)
        .set_retention(&q, Retention::default().completed(Keep::count(5_000)))
        .await
        .expect("set_retention");
    let backends = [&before, &plain, &keeping];
    let mut times = [Vec::new(), Vec::new(), Vec::new()];
    for round in 0..ROUNDS {
        for k in 0..3 {
            let at = (round + k) % 3;
            times[at].push(time_acks(backends[at], &q, ACKS).await);
        }
    }
    let kept_now = history(&keeping)
        .finished(&q, None, 10)
        .await
        .expect("finished");
    assert_eq!(kept_now.len(), 10, "the keeping queue kept nothing");
    for (name, mut t) in ["no trigger (before)", "default policy", "keeps completed"]
        .into_iter()
        .zip(times)
    {
        t.sort();
        println!(
            "ack, {name}: median {:?} per ack ({ROUNDS} rounds of {ACKS})",
            t[ROUNDS / 2]
        );
    }
}
