//! Calls cancelled mid-way (a worker aborted, a timeout around a call)
//! leave no transaction open on the connection they used: every later
//! write commits, and another handle sees it.

mod common;

use std::time::{Duration, Instant};

use leaseq_core::{Backend, LeaseToken, NewItem, QueueName};
use leaseq_postgres::PgBackend;

/// Enqueues under a request (each one transaction) are aborted at every
/// point of their run, a few microseconds apart, on a pool of two
/// connections, so the next calls get the connections the aborts left.
/// Whatever they left, each enqueue that answered, and the plain enqueues
/// after, are committed: a handle on another pool counts them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_call_leaves_no_transaction_open() {
    let Some(db) = common::TestDb::new("aborts").await else {
        return;
    };
    let options = common::options(&db.schema)
        .max_connections(2)
        .migrate_on_connect(false);
    let b = PgBackend::connect(&common::url(), options)
        .await
        .expect("a second pool");
    let q = QueueName::new("aborts").expect("valid");
    let (mut answered, mut probes) = (0u64, 0u64);
    for round in 0..400u64 {
        let task = {
            let (b, q) = (b.clone(), q.clone());
            let request = LeaseToken::random();
            tokio::spawn(async move { b.enqueue_once(&q, request, vec![NewItem::new("x")]).await })
        };
        // Let it start (a task spawned here waits in this thread's slot
        // for it), then from 0 to 2 ms: early, inside and after the
        // transaction. A spin, not a sleep: the timer's granularity is a
        // millisecond.
        tokio::task::yield_now().await;
        let until = Instant::now() + Duration::from_micros(round % 100 * 20);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        task.abort();
        if let Ok(Ok(_)) = task.await {
            answered += 1;
        }
        // A plain enqueue after each abort, on whichever connection the
        // pool gives: committed, so the other pool sees it at once.
        b.enqueue(&q, vec![NewItem::new("after")])
            .await
            .expect("an enqueue after an abort");
        probes += 1;
        let ready = db.backend.stats(&q).await.expect("stats").ready;
        // An enqueue aborted after its commit but before its answer counts
        // in the table and not in `answered`.
        assert!(
            ready >= answered + probes,
            "round {round}: another pool sees {ready} items; {answered} enqueues and \
             {probes} plain ones answered: writes were left uncommitted"
        );
    }
}
