//! A row whose timestamp is a value the column type allows but no
//! operation writes (`infinity`), planted in the store: the claim serves
//! it and never stalls the queue on it (INV-6), inspection reads it, and a
//! lease expiring at infinity is recovered by the reap.

mod common;

use std::time::Duration;

use leaseq_core::{Backend, BackendExt, NewItem, QueueName};
use sqlx::{Connection, PgConnection};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_enqueued_at_does_not_stall_claims() {
    let Some(db) = common::TestDb::new("sinf").await else {
        return;
    };
    let b = &db.backend;
    let q = QueueName::new("q").expect("q");
    let ids: Vec<_> = b
        .enqueue(&q, (0..3).map(|i| NewItem::new(format!("p{i}"))).collect())
        .await
        .expect("enqueue")
        .into_iter()
        .map(|e| e.id)
        .collect();
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    let sql = format!(
        "UPDATE \"{}\".leaseq_items SET enqueued_at = 'infinity' WHERE id = $1",
        db.schema
    );
    sqlx::query(&sql)
        .bind(i64::try_from(ids[0].get()).expect("id"))
        .execute(&mut c)
        .await
        .expect("plant");
    let mut got = 0usize;
    let mut errors = Vec::new();
    for _ in 0..5 {
        match b.claim_up_to(&q, 10, Duration::from_secs(30)).await {
            Ok(cl) => {
                for l in &cl.leases {
                    b.ack(&l.key).await.expect("ack");
                }
                got += cl.leases.len();
                eprintln!("claimed {} repairs {:?}", cl.leases.len(), cl.repairs);
            }
            Err(e) => errors.push(format!("{e:?}")),
        }
    }
    let st = b.stats(&q).await;
    eprintln!("claimed {got}, errors {errors:?}, stats {st:?}");
    assert!(
        got >= 2 && errors.is_empty(),
        "the planted row stalled the queue: {got} of the 2 healthy items claimed, {} claim errors: {:?}",
        errors.len(),
        errors.first()
    );
}

/// The same planted value on a Ready row's enqueue time and a Leased
/// row's expiry: peek and item read both, and reap recovers the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_timestamps_are_readable() {
    let Some(db) = common::TestDb::new("sinf2").await else {
        return;
    };
    let b = &db.backend;
    let q = QueueName::new("q").expect("q");
    let ids: Vec<_> = b
        .enqueue(&q, (0..2).map(|i| NewItem::new(format!("p{i}"))).collect())
        .await
        .expect("enqueue")
        .into_iter()
        .map(|e| e.id)
        .collect();
    let l = b
        .claim_up_to(&q, 1, Duration::from_millis(200))
        .await
        .expect("claim");
    assert_eq!(l.leases.len(), 1);
    let mut c = PgConnection::connect(&common::url())
        .await
        .expect("connect");
    // A leased row whose expiry is infinity, and a ready row whose
    // enqueue time is infinity.
    for (col, id) in [
        ("lease_expires_at", l.leases[0].id()),
        ("enqueued_at", ids[1]),
    ] {
        let sql = format!(
            "UPDATE \"{}\".leaseq_items SET {col} = 'infinity' WHERE id = $1",
            db.schema
        );
        sqlx::query(&sql)
            .bind(i64::try_from(id.get()).expect("id"))
            .execute(&mut c)
            .await
            .expect("plant");
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let peek_r = b
        .peek(&q, leaseq_core::ItemState::Ready, 10)
        .await
        .map(|v| v.len());
    let peek_l = b
        .peek(&q, leaseq_core::ItemState::Leased, 10)
        .await
        .map(|v| v.len());
    let item = b.item(&q, ids[1]).await.map(|i| i.id);
    let reap = b.reap(&q).await.map(|r| (r.requeued, r.repairs));
    eprintln!("peek ready {peek_r:?}\npeek leased {peek_l:?}\nitem {item:?}\nreap {reap:?}");
    assert!(
        peek_r.is_ok() && peek_l.is_ok() && item.is_ok(),
        "inspection fails on a planted infinite timestamp: peek ready ok={}, peek leased ok={}, item ok={}",
        peek_r.is_ok(),
        peek_l.is_ok(),
        item.is_ok()
    );
    // An expiry of infinity is past the lease horizon: the reap recovers
    // the lease (its ttl of 200 ms is long over) and says so.
    let leased = l.leases[0].id();
    match reap {
        Ok((1, repairs)) if repairs.iter().any(|r| r.id == leased) => {}
        other => panic!("the lease expiring at infinity was not recovered by the reap: {other:?}"),
    }
}
