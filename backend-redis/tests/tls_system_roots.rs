//! TLS with no root certificate in the settings: both clients trust the
//! system's roots, which honour `SSL_CERT_FILE`. This is what
//! `leaseq::connect("rediss://…")` does (it passes the URL alone), so a
//! private CA can be trusted there without code. A test binary of its own:
//! it sets `SSL_CERT_FILE` for the whole process.
#![cfg(all(feature = "tls", any(feature = "redis-rs", feature = "fred")))]

mod common;

use std::time::Duration;

use common::server::PrivateServer;
use common::Which;
use leaseq_core::{BackendExt, NewItem, QueueName};
use leaseq_redis::RedisOptions;
use leaseq_testkit::tls::TestPki;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rediss_url_alone_trusts_ssl_cert_file() {
    let pki = TestPki::generate().expect("certificates");
    let server = match PrivateServer::start_tls(&pki) {
        Ok(s) => s,
        Err(e) => return common::unavailable("a private TLS redis-server", e),
    };
    // Set before this process makes its first TLS connection; nothing
    // else runs in this test binary.
    std::env::set_var("SSL_CERT_FILE", pki.ca_path());
    for which in [
        #[cfg(feature = "redis-rs")]
        Which::RedisRs,
        #[cfg(feature = "fred")]
        Which::Fred,
    ] {
        let config = RedisOptions::new(server.url()).prefix(which.name());
        let b = common::connect(which, config)
            .await
            .unwrap_or_else(|e| panic!("{}: connect: {e}", which.name()));
        let q = QueueName::new("roots").expect("valid");
        b.enqueue(&q, vec![NewItem::new("x")])
            .await
            .expect("enqueue");
        let lease = b
            .claim_one(&q, Duration::from_secs(30))
            .await
            .expect("claim")
            .expect("an item");
        b.ack(&lease.key).await.expect("ack");
    }
}
