//! The public fault-injection layer: a refused call changes nothing, a
//! lost reply changes the store but returns an error, a delay only waits,
//! and faults run out after the number of calls they were armed for.

use std::sync::Arc;
use std::time::Duration;

use leaseq::layer::fault::{Fault, Faults, Op};
use leaseq::{Backend, BackendExt, MemoryBackend, NewItem, QueueName};

fn setup() -> (Faults<Arc<dyn Backend>>, QueueName) {
    let inner: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    (Faults::new(inner), QueueName::new("faults").expect("name"))
}

/// Enqueues one job and claims it.
async fn one_lease(b: &Faults<Arc<dyn Backend>>, q: &QueueName) -> leaseq::Lease {
    b.push(q, "job").await.expect("enqueue");
    b.claim_one(q, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("an item")
}

#[tokio::test]
async fn refuse_changes_nothing_and_runs_out() {
    let (b, q) = setup();
    b.inject(Op::Enqueue, Fault::Refuse, 1);
    assert!(b.enqueue(&q, vec![NewItem::new("a")]).await.is_err());
    assert_eq!(b.stats(&q).await.expect("stats").ready, 0);
    b.enqueue(&q, vec![NewItem::new("b")])
        .await
        .expect("second call runs");
    assert_eq!(b.stats(&q).await.expect("stats").ready, 1);
    assert_eq!(b.fired(), 1);
}

#[tokio::test]
async fn lose_reply_applies_the_call_but_reports_an_error() {
    let (b, q) = setup();
    let lease = one_lease(&b, &q).await;
    b.inject(Op::Ack, Fault::LoseReply, 1);
    let err = b.ack(&lease.key).await.expect_err("reply lost");
    assert!(err.to_string().contains("reply was lost"), "{err}");
    // The ack landed: the item is gone, a second ack finds no lease.
    let s = b.stats(&q).await.expect("stats");
    assert_eq!((s.ready, s.leased), (0, 0));
    assert!(matches!(
        b.ack(&lease.key).await,
        Err(leaseq::Error::LeaseLost { .. })
    ));
}

#[tokio::test(start_paused = true)]
async fn delay_waits_then_runs() {
    let (b, q) = setup();
    b.inject(Op::Stats, Fault::Delay(Duration::from_secs(5)), u32::MAX);
    let started = tokio::time::Instant::now();
    b.stats(&q).await.expect("stats");
    assert!(started.elapsed() >= Duration::from_secs(5));
    b.clear();
    let started = tokio::time::Instant::now();
    b.stats(&q).await.expect("stats");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_listing_can_be_refused_like_any_call() {
    let (b, q) = setup();
    b.push(&q, "job").await.expect("enqueue");
    b.inject(Op::Queues, Fault::Refuse, 1);
    assert!(matches!(
        b.queues().await,
        Err(leaseq::Error::Unavailable { .. })
    ));
    assert_eq!(b.queues().await.expect("queues"), vec![q]);
    assert_eq!(b.fired(), 1);
}

/// A call the server rejects for good (`Error::Rejected`) is neither
/// retryable nor resent: `settle` (what the worker finishes jobs with)
/// returns it after one call, where a refused call is tried again.
#[tokio::test]
async fn a_rejected_call_is_never_sent_again() {
    use leaseq::settle::{Held, Settle};
    let (b, q) = setup();
    let lease = one_lease(&b, &q).await;
    let held = Held {
        key: lease.key.clone(),
        until: lease.expires_at,
    };
    let settle = Settle::new().pauses(Duration::from_millis(1), Duration::from_millis(1));

    b.inject(Op::Ack, Fault::Reject, u32::MAX);
    let err = settle.ack(&b, &held).await.expect_err("rejected");
    assert!(matches!(err, leaseq::Error::Rejected { .. }), "{err:?}");
    assert!(!err.is_retryable() && !err.may_have_applied());
    assert_eq!(b.fired(), 1, "the rejected ack was sent again");
    b.clear();

    // A refusal (nothing ran, may work later) is tried again, and lands.
    b.inject(Op::Ack, Fault::Refuse, 2);
    settle.ack(&b, &held).await.expect("acked on the third try");
    assert_eq!(b.fired(), 3);
    assert_eq!(b.stats(&q).await.expect("stats").total(), 0);
}
