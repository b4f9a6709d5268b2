//! Connections: wake-ups, dropped and refused connections, bad settings.
#![cfg(any(feature = "redis-rs", feature = "fred"))]

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use common::server::PrivateServer;
use common::Which;
use leaseq_core::{BackendExt, Error, NewItem, QueueName};
use leaseq_redis::RedisOptions;

/// An idle worker blocked waiting for work wakes up when an item is
/// enqueued, long before its wait would time out. (A private server, so
/// "one blocked client" is ours.)
async fn enqueue_wakes_a_waiter(which: Which) {
    let server = match PrivateServer::start() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let b = common::connect(which, RedisOptions::new(server.url()))
        .await
        .expect("connect");
    let q = QueueName::new("wake").expect("valid");
    let waiter = {
        let (b, q) = (b.clone(), q.clone());
        tokio::spawn(async move { b.wait_for_work(&q, Duration::from_secs(120)).await })
    };
    let mut raw = common::raw(&server.url()).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query_async(&mut raw)
            .await
            .expect("info");
        if info.lines().any(|l| l.trim() == "blocked_clients:1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the waiter never blocked: {info}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    b.enqueue(&q, vec![NewItem::new("x")])
        .await
        .expect("enqueue");
    tokio::time::timeout(Duration::from_secs(60), waiter)
        .await
        .expect("the waiter was woken, not left to its 120 s timeout")
        .expect("join");
    assert!(b
        .claim_one(&q, Duration::from_secs(5))
        .await
        .expect("claim")
        .is_some());
}

/// With no marker, a wait ends at its timeout (a bounded poll).
async fn wait_without_work_times_out(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "idle").await else {
        return;
    };
    let q = QueueName::new("idle").expect("valid");
    let start = Instant::now();
    b.wait_for_work(&q, Duration::from_millis(100)).await;
    assert!(start.elapsed() >= Duration::from_millis(100));
}

/// Killed connections surface as `Backend` (the call may have run) or
/// `Unavailable` (it was never sent), or are already healed, and the
/// backend reconnects by itself; nothing is lost.
async fn killed_connections_reconnect(which: Which) {
    let server = match PrivateServer::start() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let config = RedisOptions::new(server.url()).prefix("kill");
    let b = common::connect(which, config).await.expect("connect");
    let q = QueueName::new("k").expect("valid");
    b.enqueue(&q, vec![NewItem::new("a"), NewItem::new("b")])
        .await
        .expect("enqueue");
    let mut raw = common::raw(&server.url()).await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"][..])
        .query_async(&mut raw)
        .await
        .expect("client kill");
    assert!(killed >= 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    let stats = loop {
        match b.stats(&q).await {
            Ok(s) => break s,
            Err(e) => {
                assert!(
                    matches!(e, Error::OutcomeUnknown { .. } | Error::Unavailable { .. })
                        && e.is_retryable(),
                    "{e:?}"
                );
                assert!(Instant::now() < deadline, "never reconnected: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!(stats.ready, 2);
}

/// A server that is gone gives `Backend` errors (a call cut off may have
/// run) or `Unavailable` ones (the connection was refused), promptly, never
/// a hang or a panic; once it is back the same backend works again.
async fn gone_server_is_a_backend_error(which: Which) {
    let mut server = match PrivateServer::start() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let config = RedisOptions::new(server.url())
        .prefix("gone")
        .response_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500));
    let b = common::connect(which, config).await.expect("connect");
    let q = QueueName::new("g").expect("valid");
    b.enqueue(&q, vec![NewItem::new("a")])
        .await
        .expect("enqueue");
    server.kill();
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        b.claim_up_to(&q, 1, Duration::from_secs(5)),
    )
    .await
    .expect("a failed call returns")
    .expect_err("no server");
    assert!(
        matches!(
            err,
            Error::OutcomeUnknown { .. } | Error::Unavailable { .. }
        ),
        "{err:?}"
    );
    // The wake-up wait falls back to a poll.
    b.wait_for_work(&q, Duration::from_millis(50)).await;
    server.restart().expect("restart");
    let deadline = Instant::now() + Duration::from_secs(30);
    let lease = loop {
        match b.claim_one(&q, Duration::from_secs(5)).await {
            Ok(l) => break l,
            Err(e) => {
                assert!(e.is_retryable(), "{e:?}");
                assert!(Instant::now() < deadline, "never reconnected: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    let lease = lease.expect("the item survived the restart (append-only file)");
    b.ack(&lease.key).await.expect("ack");
}

/// Unreachable servers and bad settings are typed errors at connect time
/// (a failed connect applied nothing: `Unavailable`).
async fn bad_settings_are_typed_errors(which: Which) {
    let refused =
        RedisOptions::new("redis://127.0.0.1:1").connect_timeout(Duration::from_millis(300));
    let err = common::connect(which, refused)
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, Error::Unavailable { .. }), "{err:?}");
    let bad_url = RedisOptions::new("not a url");
    let err = common::connect(which, bad_url).await.expect_err("bad url");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
    let bad_prefix = RedisOptions::new(common::url()).prefix("a{b}");
    let err = common::connect(which, bad_prefix)
        .await
        .expect_err("bad prefix");
    assert!(matches!(err, Error::InvalidInput { .. }), "{err:?}");
}

/// Bad input is refused before anything reaches the server.
async fn bad_input_is_refused(which: Which) {
    let Some((b, _cleanup)) = common::backend(which, "input").await else {
        return;
    };
    let q = QueueName::new("in").expect("valid");
    let huge = NewItem::new(vec![0u8; b.capabilities().bounds.max_payload_bytes + 1]);
    assert!(matches!(
        b.enqueue(&q, vec![huge]).await,
        Err(Error::InvalidInput { .. })
    ));
    assert_eq!(b.stats(&q).await.expect("stats").total(), 0);
    let n = b.now().await.expect("now").as_millis();
    assert!(n > 1_600_000_000_000, "the server's clock in ms: {n}");
}

for_each_client!(
    enqueue_wakes_a_waiter,
    wait_without_work_times_out,
    killed_connections_reconnect,
    gone_server_is_a_backend_error,
    bad_settings_are_typed_errors,
    bad_input_is_refused,
);
