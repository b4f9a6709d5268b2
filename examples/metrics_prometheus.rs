//! A worker whose metrics Prometheus can scrape: the `metrics` facade with
//! `metrics-exporter-prometheus` as the recorder, served at
//! `http://127.0.0.1:9464/metrics` until Ctrl-C.
//!
//! ```sh
//! cargo run -p leaseq --example metrics_prometheus
//! curl -s 127.0.0.1:9464/metrics | grep leaseq_
//! ```
//!
//! Most mails go through; a `flaky` one fails its first attempt and is
//! retried, a `bounce` one fails for good and goes Dead, so every counter
//! has something to show. `tests/prometheus_scrape.rs` runs [`serve`] and
//! checks what a scrape returns.

use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, Backend, BackendExt, BoxError, CancellationToken, Job, JobContext, MemoryBackend,
    Permanent, QueueName, RetryPolicy, Worker,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The queue the example works on.
pub const QUEUE: &str = "emails";

/// Bucket bounds (seconds) of the `_seconds` histograms.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0,
];

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let queue = QueueName::new(QUEUE)?;
    for i in 0..1_000 {
        backend.push(&queue, format!("email {i}")).await?;
    }
    backend.push(&queue, "flaky email").await?;
    backend.push(&queue, "bounce email").await?;

    let listener = TcpListener::bind("127.0.0.1:9464").await?;
    println!("serving http://127.0.0.1:9464/metrics (Ctrl-C to stop)");
    let stop = CancellationToken::new();
    let ctrl_c = stop.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        ctrl_c.cancel();
    });
    serve(listener, backend, stop).await
}

/// Installs the Prometheus recorder (once per process), runs a worker on
/// [`QUEUE`] of `backend` and the queue gauges, and answers every
/// connection on `listener` with the metrics, until `stop` is cancelled.
pub async fn serve(
    listener: TcpListener,
    backend: Arc<dyn Backend>,
    stop: CancellationToken,
) -> Result<(), BoxError> {
    // Histograms with buckets (summaries otherwise), so they aggregate
    // across workers. Install the recorder before building workers: they
    // register their metrics when built.
    let prometheus = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)?
        .install_recorder()?;

    let queue = QueueName::new(QUEUE)?;
    let worker = Worker::builder(backend.clone(), QUEUE)
        .concurrency(8)
        .retry(RetryPolicy::exponential(Duration::from_millis(100)))
        .build(handler_fn(|job: Job, _ctx: JobContext| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            match job.payload.as_ref() {
                b"bounce email" => Err(Permanent::boxed("mailbox does not exist")),
                b"flaky email" if job.attempts == 1 => Err("mail server busy".into()),
                _ => Ok(()),
            }
        }))?;
    let worker = tokio::spawn(worker.run(stop.clone()));
    let gauges = tokio::spawn(leaseq::export_queue_gauges(
        backend,
        vec![queue],
        Duration::from_millis(500),
        stop.clone(),
    ));

    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => {
                let (socket, _) = accepted?;
                tokio::spawn(answer(socket, prometheus.clone()));
            }
        }
    }
    worker.await??;
    gauges.await?;
    Ok(())
}

/// Answers one HTTP request (whatever it asks) with the metrics.
async fn answer(mut socket: tokio::net::TcpStream, prometheus: PrometheusHandle) {
    let mut request = [0u8; 1024];
    let _ = socket.read(&mut request).await;
    let body = prometheus.render();
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(body.as_bytes()).await;
}
