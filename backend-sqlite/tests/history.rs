//! What is SQLite's own in the History group (the shared checks are in the
//! conformance suite): a removal keeps nothing and trims nothing, a
//! cancel-requested lease that a release ends is kept as it was, a purge of
//! leased items leaves no kept rows or counts behind, the completion
//! counter counts acks only and outlives a purge, the dead-letter counter
//! follows every path in and out of Dead and `collect` removes the oldest
//! deaths beyond the bound with their keys, a second handle on
//! the file in this process is woken by an ending, and (ignored) the
//! retention-cost measurement.

mod common;

use std::time::{Duration, Instant};

use leaseq_core::testing::TestHooks;
use leaseq_core::{
    Admin, Backend, BackendExt, Bytes, Control, Ending, History, ItemId, Keep, NewItem, QueueName,
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

/// `stats(q).completed`.
async fn completed(b: &leaseq_sqlite::SqliteBackend, q: &QueueName) -> Option<u64> {
    b.stats(q).await.expect("stats").completed
}

#[tokio::test]
async fn completions_count_acks_only_and_outlive_a_purge() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("counted");
    assert_eq!(completed(b, &q).await, Some(0));
    let items = (0..6).map(|i| NewItem::new(format!("item {i}"))).collect();
    b.enqueue(&q, items).await.expect("enqueue");
    let leases = b.claim_up_to(&q, 6, TTL).await.expect("claim").leases;
    assert_eq!(leases.len(), 6);
    b.ack(&leases[0].key).await.expect("ack");
    let many = b
        .ack_many(&[leases[1].key.clone(), leases[2].key.clone()])
        .await
        .expect("ack_many");
    assert!(many.iter().all(Result::is_ok));
    history(b)
        .complete(&leases[3].key, Bytes::from_static(b"r"))
        .await
        .expect("complete");
    // A cancel-requested lease acked ends Cancelled: no completion.
    b.cancel(&q, leases[4].id()).await.expect("cancel");
    b.ack(&leases[4].key).await.expect("ack");
    // A removal of a leased item is no completion either.
    b.remove_item(&q, leases[5].id())
        .await
        .expect("remove_item");
    assert_eq!(completed(b, &q).await, Some(4));
    // A purge of leased items counts none of them, and keeps the count.
    b.enqueue(&q, vec![NewItem::new("x"), NewItem::new("y")])
        .await
        .expect("enqueue");
    let purged = b.claim_up_to(&q, 2, TTL).await.expect("claim").leases;
    assert_eq!(purged.len(), 2);
    assert_eq!(b.purge(&q).await.expect("purge"), 2);
    assert_eq!(completed(b, &q).await, Some(4));
    // Another handle on the file reads the same count.
    let other = common::open(&db.path).await;
    assert_eq!(completed(&other, &q).await, Some(4));
    b.delete_queue(&q).await.expect("delete_queue");
    assert_eq!(completed(b, &q).await, Some(0));
}

/// The dead-letter counter of `queue` (migration 0018), checked against
/// the count of its Dead rows.
async fn dead_count(db: &common::TestDb, q: &QueueName) -> i64 {
    let counted: Option<i64> =
        sqlx::query_scalar("SELECT dead FROM leaseq_queue_counts WHERE queue = ?1")
            .bind(q.as_str())
            .fetch_optional(db.backend.pool())
            .await
            .expect("read the counter");
    let rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM leaseq_items WHERE queue = ?1 AND state = 'dead'")
            .bind(q.as_str())
            .fetch_one(db.backend.pool())
            .await
            .expect("count the rows");
    assert_eq!(counted.unwrap_or(0), rows, "the counter disagrees");
    rows
}

/// Enqueues `n` items with `keys` (`unique_for` a day) and fails each.
async fn kill(b: &leaseq_sqlite::SqliteBackend, q: &QueueName, keys: &[&str]) -> Vec<ItemId> {
    let items = keys
        .iter()
        .map(|k| {
            NewItem::new(k.to_string())
                .dedup_key(*k)
                .unique_for(Duration::from_secs(86_400))
        })
        .collect();
    let ids: Vec<ItemId> = b
        .enqueue(q, items)
        .await
        .expect("enqueue")
        .iter()
        .map(|e| e.id)
        .collect();
    for _ in keys {
        let l = b.claim_one(q, TTL).await.expect("claim").expect("a lease");
        b.fail(&l.key, "gone").await.expect("fail");
    }
    ids
}

#[tokio::test]
async fn dead_letters_are_counted_on_every_path_and_collected_oldest_first() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = queue("dead");
    let ids = kill(b, &q, &["a", "b", "c", "d", "e"]).await;
    assert_eq!(dead_count(&db, &q).await, 5);
    // Out of Dead: a redrive, a removal, a cancel.
    assert!(b.redrive_item(&q, ids[4]).await.expect("redrive_item"));
    b.remove_item(&q, ids[3]).await.expect("remove_item");
    b.cancel(&q, ids[2]).await.expect("cancel");
    assert_eq!(dead_count(&db, &q).await, 2);
    // A cancel-requested lease released on its last attempt ends at once.
    let l = b.claim_one(&q, TTL).await.expect("claim").expect("a lease");
    assert_eq!(l.id(), ids[4]);
    b.cancel(&q, l.id()).await.expect("cancel");
    let released = b.release(&l.key, Duration::ZERO).await.expect("release");
    assert_eq!(released, leaseq_core::Released::Cancelled);
    assert_eq!(dead_count(&db, &q).await, 2);
    // Keep one: the oldest death goes, and its keys are free (no hold).
    let policy = Retention::default().dead(Keep::count(1));
    history(b)
        .set_retention(&q, policy)
        .await
        .expect("set_retention");
    assert_eq!(history(b).retention(&q).await.expect("retention"), policy);
    assert_eq!(history(b).collect(&q).await.expect("collect"), 1);
    assert_eq!(dead_count(&db, &q).await, 1);
    let left = b
        .peek(&q, leaseq_core::ItemState::Dead, 10)
        .await
        .expect("peek");
    assert_eq!(left.iter().map(|i| i.id).collect::<Vec<_>>(), [ids[1]]);
    let again = b
        .enqueue(&q, vec![NewItem::new("a").dedup_key("a")])
        .await
        .expect("enqueue");
    assert!(
        !again[0].deduplicated,
        "a collected dead letter held its key"
    );
    // An age bound of zero takes the rest; a second collect finds nothing.
    let policy = Retention::default().dead(Keep::for_age(Duration::ZERO));
    history(b)
        .set_retention(&q, policy)
        .await
        .expect("set_retention");
    assert_eq!(history(b).collect(&q).await.expect("collect"), 1);
    assert_eq!(history(b).collect(&q).await.expect("collect"), 0);
    assert_eq!(dead_count(&db, &q).await, 0);
    // A purge and a delete leave the counter right.
    kill(b, &q, &["x", "y"]).await;
    assert_eq!(b.purge(&q).await.expect("purge"), 3);
    assert_eq!(dead_count(&db, &q).await, 0);
    kill(b, &q, &["z"]).await;
    b.delete_queue(&q).await.expect("delete_queue");
    assert_eq!(dead_count(&db, &q).await, 0);
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

/// Times 201 `collect`s of `q` that must remove nothing; answers the
/// median and the 90th percentile.
async fn time_collects(b: &leaseq_sqlite::SqliteBackend, q: &QueueName) -> (Duration, Duration) {
    const RUNS: usize = 201;
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = Instant::now();
        let gone = history(b).collect(q).await.expect("collect");
        times.push(t.elapsed());
        assert_eq!(gone, 0, "collect removed what the policy keeps");
    }
    times.sort();
    (times[RUNS / 2], times[RUNS * 9 / 10])
}

/// The retention-cost figure: the median time of a `collect` that removes
/// nothing, with 10 and with 100,000 kept unexpired items (a day's age
/// bound). Prints the figures; asserts only that nothing was removed.
/// `cargo test -p leaseq-sqlite --release --test history -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn collect_cost_with_10_and_100000_kept() {
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
        let (median, p90) = time_collects(b, &q).await;
        let listed = history(b).finished(&q, None, 1).await.expect("finished");
        assert_eq!(listed.len(), 1);
        println!("collect with {kept} kept unexpired items: median {median:?}, p90 {p90:?}");
    }
}

/// The dead-letter bound's cost: the median time of a `collect` that
/// removes nothing, with 10 and with 100,000 dead letters within both a
/// day's age bound and a count bound of 200,000. Prints the figures;
/// asserts only that nothing was removed.
/// `cargo test -p leaseq-sqlite --release --test history -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn collect_cost_with_10_and_100000_dead_letters() {
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let bound = Keep::for_age(Duration::from_secs(86_400)).at_most(200_000);
    for dead in [10usize, 100_000] {
        let q = queue(&format!("dead-{dead}"));
        history(b)
            .set_retention(&q, Retention::default().dead(bound))
            .await
            .expect("set_retention");
        let mut left = dead;
        while left > 0 {
            let n = left.min(1000);
            let items = (0..n)
                .map(|i| NewItem::new(format!("item {i}")).max_attempts(1))
                .collect();
            b.enqueue(&q, items).await.expect("enqueue");
            let max = u32::try_from(n).expect("a batch");
            let leases = b.claim_up_to(&q, max, TTL).await.expect("claim").leases;
            assert_eq!(leases.len(), n);
            b.expire_leases(&q).await.expect("expire");
            assert_eq!(b.reap(&q).await.expect("reap").dead, n as u64);
            left -= n;
        }
        let (median, p90) = time_collects(b, &q).await;
        assert_eq!(b.stats(&q).await.expect("stats").dead, dead as u64);
        println!(
            "collect with {dead} dead letters within the bound: median {median:?}, p90 {p90:?}"
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

/// [`unsynced`], with `trigger` dropped: the ack path as before it.
async fn unsynced_without(trigger: &str) -> (leaseq_sqlite::SqliteBackend, tempfile::TempDir) {
    let (b, dir) = unsynced().await;
    sqlx::query(&format!("DROP TRIGGER {trigger}"))
        .execute(b.pool())
        .await
        .expect("drop the trigger");
    (b, dir)
}

/// Times 1,000 acks of `q` on each of `named` per round, in 41 rounds
/// that rotate their order so the machine's load falls on each alike;
/// prints each one's median time per ack, and the median over rounds of
/// its time over the first one's in the same round (the paired figure,
/// steadier on a shared machine).
async fn compare_acks(q: &QueueName, named: &[(&str, &leaseq_sqlite::SqliteBackend)]) {
    const ROUNDS: usize = 41;
    const ACKS: usize = 1000;
    let mut times = vec![Vec::new(); named.len()];
    for round in 0..ROUNDS {
        for k in 0..named.len() {
            let at = (round + k) % named.len();
            times[at].push(time_acks(named[at].1, q, ACKS).await);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for ((name, _), t) in named.iter().zip(&times) {
        let ratios = t
            .iter()
            .zip(&times[0])
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        let micros = t.iter().map(|d| d.as_secs_f64() * 1e6).collect();
        println!(
            "ack, {name}: median {:.1} µs per ack, {:.1}% of {} per round ({ROUNDS} rounds of {ACKS})",
            median(micros),
            median(ratios) * 100.0,
            named[0].0
        );
    }
}

/// The ack path's cost: per-ack time on a queue with the default policy
/// with the recording trigger (as shipped) and with it dropped (as before
/// migration 0016), and on a queue that keeps completed items, each on a
/// file of its own; prints medians.
/// `cargo test -p leaseq-sqlite --release --test history -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn ack_cost_with_and_without_the_trigger() {
    let (before, _a) = unsynced_without("leaseq_finished_on_ack").await;
    let (plain, _b) = unsynced().await;
    let (keeping, _c) = unsynced().await;
    let q = queue("acked");
    history(&keeping)
        .set_retention(&q, Retention::default().completed(Keep::count(5_000)))
        .await
        .expect("set_retention");
    let named = [
        ("no trigger (before)", &before),
        ("default policy", &plain),
        ("keeps completed", &keeping),
    ];
    compare_acks(&q, &named).await;
    let kept_now = history(&keeping)
        .finished(&q, None, 10)
        .await
        .expect("finished");
    assert_eq!(kept_now.len(), 10, "the keeping queue kept nothing");
}

/// The counters' cost on the ack path: per-ack time with the trigger that
/// counts completions (and dead letters deleted) dropped, as before
/// migration 0017, and as shipped, on a queue with the default policy,
/// each on a file of its own; prints medians.
/// `cargo test -p leaseq-sqlite --release --test history -- --ignored --nocapture`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn ack_cost_with_and_without_the_completion_counter() {
    let (before, _a) = unsynced_without("leaseq_counted_on_delete").await;
    let (counted, _b) = unsynced().await;
    let q = queue("acked");
    compare_acks(
        &q,
        &[("no counter (before)", &before), ("counter", &counted)],
    )
    .await;
    let counted_now = counted.stats(&q).await.expect("stats").completed;
    assert_eq!(counted_now, Some(41 * 1000));
}
