//! TLS: `rediss://` to a private TLS-only `redis-server` (a throwaway CA
//! and server certificate made by the test), on both clients: a round trip
//! over TLS, and every way a TLS URL could end up in plaintext or with an
//! untrusted server refused before anything is written.
#![cfg(all(feature = "tls", any(feature = "redis-rs", feature = "fred")))]

#[macro_use]
mod common;

use std::time::Duration;

use common::server::PrivateServer;
use common::Which;
use leaseq_core::{BackendExt, Error, LeaseTtl, NewItem, QueueName};
use leaseq_redis::RedisOptions;
use leaseq_testkit::tls::TestPki;

/// A CA and a TLS-only server presenting a certificate it signed; `None`
/// after the skip line (a panic in CI) when no TLS `redis-server` starts.
fn tls_server() -> Option<(TestPki, PrivateServer)> {
    let pki = TestPki::generate().expect("certificates");
    match PrivateServer::start_tls(&pki) {
        Ok(s) => Some((pki, s)),
        Err(e) => {
            common::unavailable("a private TLS redis-server", e);
            None
        }
    }
}

/// Enqueue, claim (a batch and a wait for work on the dedicated
/// connection), extend and ack over `rediss://`, trusting the test CA.
async fn round_trip_over_tls(which: Which) {
    let Some((pki, server)) = tls_server() else {
        return;
    };
    let url = server.url();
    assert!(url.starts_with("rediss://"), "{url}");
    let config = RedisOptions::new(&url)
        .tls_root_cert(pki.ca_pem())
        .prefix("tls");
    assert!(config.uses_tls());
    let b = common::connect(which, config)
        .await
        .expect("connect over TLS");
    let q = QueueName::new("secure").expect("valid");
    b.enqueue(&q, vec![NewItem::new("one"), NewItem::new("two")])
        .await
        .expect("enqueue");
    // A marker is waiting: the pop on the dedicated connection (over TLS
    // too) answers at once rather than at its timeout.
    let waited = std::time::Instant::now();
    b.wait_for_work(&q, Duration::from_secs(20)).await;
    assert!(waited.elapsed() < Duration::from_secs(10));
    let leases = b
        .claim_up_to(&q, 2, Duration::from_secs(30))
        .await
        .expect("claim")
        .leases;
    assert_eq!(leases.len(), 2);
    assert_eq!(&leases[0].payload[..], b"one");
    let ttl = LeaseTtl::new(Duration::from_secs(60)).expect("ttl");
    b.extend(&leases[1].key, ttl).await.expect("extend");
    for l in &leases {
        b.ack(&l.key).await.expect("ack");
    }
    assert_eq!(b.stats(&q).await.expect("stats").total(), 0);
    // The items went through this server, over its TLS port.
    let keys = server.command(&["KEYS", "{tls:secure}*"]).expect("keys");
    assert!(matches!(keys, redis::Value::Array(k) if !k.is_empty()));
}

/// The names of the commands a server has run (`INFO commandstats`).
fn commands_run(server: &PrivateServer) -> Vec<String> {
    let info = match server.command(&["INFO", "commandstats"]).expect("info") {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        other => panic!("INFO: {other:?}"),
    };
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| l.split(':').next())
        .map(str::to_owned)
        .collect()
}

/// `rediss://` to a server that speaks plaintext fails at connect, and
/// nothing reaches the server: no key, and no command but the test's own
/// probes (`PING`, `INFO`, `DBSIZE`).
async fn tls_url_to_a_plaintext_server_fails(which: Which) {
    let server = match PrivateServer::start_volatile() {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private redis-server", e),
    };
    let pki = TestPki::generate().expect("certificates");
    let url = format!("rediss://127.0.0.1:{}", server.port());
    for config in [
        RedisOptions::new(&url).tls_root_cert(pki.ca_pem()),
        RedisOptions::new(&url),
    ] {
        let config = config
            .prefix("plain")
            .connect_timeout(Duration::from_secs(1));
        match common::connect(which, config).await {
            Ok(_) => panic!(
                "{}: rediss:// connected to a plaintext server",
                which.name()
            ),
            Err(e) => assert!(
                matches!(e, Error::Unavailable { .. } | Error::OutcomeUnknown { .. }),
                "{e:?}"
            ),
        }
    }
    assert_eq!(
        server.command(&["DBSIZE"]).expect("dbsize"),
        redis::Value::Int(0)
    );
    let ran = commands_run(&server);
    assert!(
        ran.iter()
            .all(|c| ["ping", "info", "dbsize"].contains(&c.as_str())),
        "{}: the server ran {ran:?}",
        which.name()
    );
}

/// A server whose certificate does not chain to the trusted roots (an
/// unrelated CA given, or the system's roots) is refused, and `redis://`
/// to the TLS port gets no answer.
async fn untrusted_or_plaintext_is_refused(which: Which) {
    let Some((pki, server)) = tls_server() else {
        return;
    };
    for untrusted in [
        RedisOptions::new(server.url()).tls_root_cert(pki.unrelated_ca_pem()),
        RedisOptions::new(server.url()),
    ] {
        let untrusted = untrusted.connect_timeout(Duration::from_secs(1));
        assert!(
            common::connect(which, untrusted.clone()).await.is_err(),
            "{}: {untrusted:?}: a certificate from an untrusted CA was accepted",
            which.name()
        );
    }
    let plain = RedisOptions::new(format!("redis://127.0.0.1:{}", server.port()))
        .connect_timeout(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(1));
    assert!(common::connect(which, plain).await.is_err());
    assert_eq!(
        server.command(&["DBSIZE"]).expect("dbsize"),
        redis::Value::Int(0)
    );
}

/// Settings that ask for TLS in a way that cannot be honoured are refused
/// before any connection: a root certificate with a `redis://` URL, PEM
/// with no certificate, seeds that mix TLS and plaintext.
async fn contradictory_tls_settings_are_refused(which: Which) {
    let pki = TestPki::generate().expect("certificates");
    for config in [
        RedisOptions::new("redis://127.0.0.1:1").tls_root_cert(pki.ca_pem()),
        RedisOptions::new("rediss://127.0.0.1:1").tls_root_cert(b"no pem here".to_vec()),
        RedisOptions::cluster(["rediss://127.0.0.1:1", "redis://127.0.0.1:2"]),
    ] {
        match common::connect(which, config.clone()).await {
            Err(Error::InvalidInput { .. }) => {}
            other => panic!("{config:?}: {:?}", other.map(|_| ())),
        }
    }
}

for_each_client!(
    round_trip_over_tls,
    tls_url_to_a_plaintext_server_fails,
    untrusted_or_plaintext_is_refused,
    contradictory_tls_settings_are_refused,
);
