//! A worker whose metrics Prometheus can scrape: the `metrics` facade with
//! `metrics-exporter-prometheus` as the recorder, served at
//! `http://127.0.0.1:9464/metrics` until Ctrl-C.
//!
//! ```sh
//! cargo run --example metrics_prometheus
//! curl -s 127.0.0.1:9464/metrics | grep leaseq_
//! ```

use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, Backend, BackendExt, CancellationToken, Job, JobContext, MemoryBackend, QueueName,
    Worker,
};
use metrics_exporter_prometheus::PrometheusBuilder;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Install the recorder before building workers: they register their
    // metrics when built.
    let prometheus = PrometheusBuilder::new().install_recorder()?;

    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let queue = QueueName::new("emails")?;
    for i in 0..1_000 {
        backend.push(&queue, format!("email {i}")).await?;
    }
    let stop = CancellationToken::new();
    let worker = Worker::builder(backend.clone(), "emails")
        .concurrency(8)
        .build(handler_fn(|_job: Job, _ctx: JobContext| async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            Ok::<_, std::io::Error>(())
        }))?;
    tokio::spawn(worker.run(stop.clone()));
    tokio::spawn(leaseq::export_queue_gauges(
        backend,
        vec![queue],
        Duration::from_secs(5),
        stop.clone(),
    ));

    let listener = tokio::net::TcpListener::bind("127.0.0.1:9464").await?;
    println!("serving http://127.0.0.1:9464/metrics (Ctrl-C to stop)");
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            accepted = listener.accept() => {
                let (mut socket, _) = accepted?;
                let body = prometheus.render();
                tokio::spawn(async move {
                    let mut request = [0u8; 1024];
                    let _ = socket.read(&mut request).await;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(body.as_bytes()).await;
                });
            }
        }
    }
    stop.cancel();
    Ok(())
}
