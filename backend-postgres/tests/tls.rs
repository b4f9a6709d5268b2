//! TLS to a private PostgreSQL (`ssl = on`, `hostssl` lines only, a
//! certificate from a throwaway CA made by the test): `sslmode=require`
//! and `verify-full` with `sslrootcert` do a round trip over TLS;
//! `sslmode=disable`, and `verify-full` without trusting the CA, are
//! refused.
#![cfg(feature = "tls")]

use std::time::Duration;

use leaseq_core::{Backend, BackendExt, Error, NewItem, QueueName};
use leaseq_postgres::{PgBackend, PgOptions};
use leaseq_testkit::pg_server::PrivatePostgres;
use leaseq_testkit::tls::TestPki;
use sqlx::{Connection, PgConnection};

/// A CA and a TLS-only private server; `None` after the skip line (a
/// panic in CI) when the server binaries are missing or it won't start.
fn tls_server() -> Option<(TestPki, PrivatePostgres)> {
    let pki = TestPki::generate().expect("certificates");
    match PrivatePostgres::start_tls(&pki) {
        Ok(s) => Some((pki, s)),
        Err(e) => {
            leaseq_testkit::env::skip("a private PostgreSQL with ssl = on", e);
            None
        }
    }
}

fn options(schema: &str) -> PgOptions {
    PgOptions::new()
        .schema(schema)
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(5))
}

/// A backend on `url`, then enqueue, claim and ack one item.
async fn round_trip(url: &str, schema: &str) {
    let b = PgBackend::connect(url, options(schema))
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
    let q = QueueName::new("secure").expect("valid");
    b.enqueue(&q, vec![NewItem::new("over tls")])
        .await
        .expect("enqueue");
    let lease = b
        .claim_one(&q, Duration::from_secs(30))
        .await
        .expect("claim")
        .expect("an item");
    assert_eq!(&lease.payload[..], b"over tls");
    b.ack(&lease.key).await.expect("ack");
    assert_eq!(b.stats(&q).await.expect("stats").total(), 0);
}

/// Whether the session on `url` is encrypted, as the server sees it.
async fn session_uses_ssl(url: &str) -> bool {
    let mut c = PgConnection::connect(url).await.expect("connect");
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&mut c)
        .await
        .expect("pg_stat_ssl");
    let _ = c.close().await;
    ssl
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_does_a_round_trip_over_tls() {
    let Some((_pki, server)) = tls_server() else {
        return;
    };
    let url = server.url("sslmode=require");
    round_trip(&url, "tls_require").await;
    assert!(session_uses_ssl(&url).await, "the session is encrypted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_trusting_the_private_ca_does_a_round_trip() {
    let Some((pki, server)) = tls_server() else {
        return;
    };
    let ca = pki.ca_path();
    let url = server.url(&format!("sslmode=verify-full&sslrootcert={}", ca.display()));
    round_trip(&url, "tls_verify").await;
    assert!(session_uses_ssl(&url).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_and_untrusted_servers_are_refused() {
    let Some((pki, server)) = tls_server() else {
        return;
    };
    let other_ca = pki.dir().join("other-ca.pem");
    std::fs::write(&other_ca, pki.unrelated_ca_pem()).expect("write");
    for (params, why, answered) in [
        // pg_hba.conf has `hostssl` lines only: the server answers with a
        // refusal (SQLSTATE 28000), which trying again cannot change.
        ("sslmode=disable".to_owned(), "no encryption", true),
        // Mozilla's roots do not include the test CA: the handshake fails
        // before the server says anything.
        ("sslmode=verify-full".to_owned(), "UnknownIssuer", false),
        (
            format!("sslmode=verify-ca&sslrootcert={}", other_ca.display()),
            "UnknownIssuer",
            false,
        ),
    ] {
        let url = server.url(&params);
        match PgBackend::connect(&url, options("tls_refused")).await {
            Ok(_) => panic!("{params}: connected"),
            Err(e) => {
                if answered {
                    assert!(matches!(e, Error::Rejected { .. }), "{params}: {e:?}");
                } else {
                    assert!(matches!(e, Error::Unavailable { .. }), "{params}: {e:?}");
                }
                let text = format!("{e:?}");
                assert!(text.contains(why), "{params}: expected {why:?} in {text}");
            }
        }
    }
    // Nothing was created by the refused connections.
    let url = server.url("sslmode=require");
    let mut c = PgConnection::connect(&url).await.expect("connect");
    let n: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_namespace WHERE nspname = 'tls_refused'")
            .fetch_one(&mut c)
            .await
            .expect("count");
    assert_eq!(n, 0);
}
