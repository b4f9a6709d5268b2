//! A single-job claim plus ack is 2 SQL statements, and the life of a batch
//! (enqueue, claim, `ack_many`) 3 whatever its size, counted two ways: the
//! backend's own step counter ([`TestHooks::steps`]), and every statement
//! sqlx sends to SQLite, as sqlx logs each one (target `sqlx::query`) to
//! the `tracing` subscriber this test installs. Each of those statements
//! runs in autocommit, so it is also one transaction.
//!
//! One test in its own binary: the subscriber is process-wide (sqlx runs
//! statements on its own worker thread).

mod common;

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use leaseq_core::{Backend, BackendExt, LeaseKey, NewItem, QueueName};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// The first words of every statement sqlx logged.
static STATEMENTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records sqlx's statement events, nothing else.
struct StatementLog;

fn is_statement(meta: &Metadata<'_>) -> bool {
    meta.target() == "sqlx::query"
}

struct Summary(String);

impl Visit for Summary {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "summary" {
            self.0 = value.to_owned();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" && self.0.is_empty() {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for StatementLog {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if is_statement(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        is_statement(meta)
    }

    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut summary = Summary(String::new());
        event.record(&mut summary);
        STATEMENTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(summary.0);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// The statements logged since the last call.
fn take() -> Vec<String> {
    std::mem::take(&mut *STATEMENTS.lock().unwrap_or_else(PoisonError::into_inner))
}

#[tokio::test]
async fn claim_plus_ack_is_two_statements_and_a_batch_life_three() {
    tracing::subscriber::set_global_default(StatementLog).expect("the only subscriber");
    let db = common::TestDb::new().await;
    let b = &db.backend;
    let q = QueueName::new("statements").expect("queue");
    let steps = || b.test_hooks().and_then(|h| h.steps(&q)).expect("steps");
    let ttl = Duration::from_secs(30);

    // Warm up: every statement below prepared once.
    b.push(&q, "warm").await.expect("enqueue");
    let lease = b.claim_one(&q, ttl).await.expect("claim").expect("one");
    b.ack(&lease.key).await.expect("ack");
    b.enqueue(&q, (0..100).map(|_| NewItem::new("w")).collect())
        .await
        .expect("enqueue");
    let batch = b.claim_up_to(&q, 100, ttl).await.expect("claim");
    let keys: Vec<LeaseKey> = batch.leases.iter().map(|l| l.key.clone()).collect();
    b.ack_many(&keys).await.expect("ack_many");

    // One job: claim + ack.
    b.push(&q, "one").await.expect("enqueue");
    let (before, _) = (steps(), take());
    let lease = b.claim_one(&q, ttl).await.expect("claim").expect("one");
    b.ack(&lease.key).await.expect("ack");
    let sent = take();
    let counted = steps() - before;
    println!("single claim + ack: {counted} steps; statements {sent:?}");
    assert_eq!(counted, 2, "steps of a single claim + ack");
    assert_eq!(
        sent.len(),
        2,
        "statements of a single claim + ack: {sent:?}"
    );
    assert!(
        sent[0].starts_with("WITH") && sent[1].starts_with("DELETE"),
        "{sent:?}"
    );

    // A batch of 100: enqueue, claim, ack_many.
    let before = steps();
    b.enqueue(&q, (0..100).map(|_| NewItem::new("b")).collect())
        .await
        .expect("enqueue");
    let batch = b.claim_up_to(&q, 100, ttl).await.expect("claim");
    assert_eq!(batch.leases.len(), 100);
    let keys: Vec<LeaseKey> = batch.leases.iter().map(|l| l.key.clone()).collect();
    for r in b.ack_many(&keys).await.expect("ack_many") {
        r.expect("acked");
    }
    let sent = take();
    let counted = steps() - before;
    println!("life of a batch of 100: {counted} steps; statements {sent:?}");
    assert_eq!(counted, 3, "steps of a batch's life");
    assert_eq!(sent.len(), 3, "statements of a batch's life: {sent:?}");
    let s = b.stats(&q).await.expect("stats");
    assert_eq!(s.total(), 0);
}
