//! Runs `examples/metrics_prometheus.rs` on a free port and scrapes it over
//! HTTP: every documented metric is there, with its help text and the
//! values the jobs it ran must have left. Its own test binary: the example
//! installs the process's one global recorder.

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/metrics_prometheus.rs"]
mod example;

use std::sync::Arc;
use std::time::Duration;

use leaseq::{metric_names, Backend, BackendExt, CancellationToken, MemoryBackend, QueueName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const OK_JOBS: usize = 20;

/// One scrape of `/metrics`: the body.
async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut conn = tokio::net::TcpStream::connect(addr).await.expect("connect");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .expect("request");
    let mut response = String::new();
    conn.read_to_string(&mut response).await.expect("response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The value of the sample `name{labels}` (labels in the order rendered).
fn sample(body: &str, name: &str, labels: &str) -> Option<f64> {
    let key = format!("{name}{{{labels}}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .map(|v| v.trim().parse().expect("a number"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_shows_every_documented_metric_with_the_jobs_values() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let q = QueueName::new(example::QUEUE).expect("name");
    for i in 0..OK_JOBS {
        backend.push(&q, format!("email {i}")).await.expect("push");
    }
    backend.push(&q, "flaky email").await.expect("push");
    backend.push(&q, "bounce email").await.expect("push");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let served = tokio::spawn(example::serve(listener, backend.clone(), stop.clone()));

    // Polls until the jobs are done and the gauges have sampled that;
    // bounded, so a regression fails instead of hanging.
    let queue = format!("queue=\"{}\"", example::QUEUE);
    let mut body = String::new();
    for _ in 0..600 {
        body = scrape(addr).await;
        let done = sample(&body, metric_names::ACKED, &queue) == Some((OK_JOBS + 1) as f64);
        let dead = sample(
            &body,
            metric_names::ITEMS,
            &format!("{queue},state=\"dead\""),
        );
        let ready = sample(
            &body,
            metric_names::ITEMS,
            &format!("{queue},state=\"ready\""),
        );
        if done && dead == Some(1.0) && ready == Some(0.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    served.await.expect("join").expect("serve");

    for name in metric_names::ALL {
        assert!(
            body.lines().any(|l| l.starts_with(name)),
            "{name} is missing from the scrape:\n{body}"
        );
        // The help text the worker gave the recorder (describe_metrics).
        let help = format!("# HELP {name} ");
        assert!(
            body.lines()
                .any(|l| l.starts_with(&help) && l.len() > help.len() + 10),
            "{name} has no help text in the scrape:\n{body}"
        );
    }
    let count = |name: &str| sample(&body, name, &queue);
    // Every job but the bounce is acked, the flaky one on its second try.
    assert_eq!(
        count(metric_names::ACKED),
        Some((OK_JOBS + 1) as f64),
        "{body}"
    );
    assert_eq!(
        count(metric_names::CLAIMED),
        Some((OK_JOBS + 3) as f64),
        "{body}"
    );
    assert_eq!(count(metric_names::RETRIED), Some(1.0), "{body}");
    assert_eq!(count(metric_names::DEAD), Some(1.0), "{body}");
    assert_eq!(count(metric_names::PANICKED), Some(0.0), "{body}");
    assert_eq!(count(metric_names::IN_FLIGHT), Some(0.0), "{body}");
    let items = |state: &str| {
        sample(
            &body,
            metric_names::ITEMS,
            &format!("{queue},state=\"{state}\""),
        )
    };
    assert_eq!(items("dead"), Some(1.0), "{body}");
    assert_eq!(items("ready"), Some(0.0), "{body}");
    assert_eq!(items("leased"), Some(0.0), "{body}");
    // One start per claim: 22 jobs, the flaky one twice.
    for histogram in [metric_names::WAIT, metric_names::DURATION] {
        let n = sample(&body, &format!("{histogram}_count"), &queue);
        assert_eq!(n, Some((OK_JOBS + 3) as f64), "{histogram}_count\n{body}");
        let sum = sample(&body, &format!("{histogram}_sum"), &queue).expect("a sum");
        assert!(sum > 0.0, "{histogram}_sum is {sum}");
        let inf = sample(
            &body,
            &format!("{histogram}_bucket"),
            &format!("{queue},le=\"+Inf\""),
        );
        assert_eq!(
            inf, n,
            "{histogram} has buckets, the last holding every sample"
        );
    }
}
