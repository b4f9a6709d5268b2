//! The worker's and the producer's spans as OpenTelemetry spans: a
//! `tracing-opentelemetry` layer turns them into OpenTelemetry spans with
//! the messaging semantic conventions (`leaseq::spans` lists the fields).
//!
//! ```sh
//! cargo run -p leaseq --example otel_traces
//! ```
//!
//! The spans go to the SDK's in-memory exporter and are printed, one a
//! line; a service would build its provider with an OTLP exporter
//! (`opentelemetry-otlp`) instead, and install the subscriber globally.
//! `tests/otel_spans.rs` runs [`traced_run`] and checks the spans.

use std::sync::Arc;
use std::time::Duration;

use leaseq::{
    handler_fn, Backend, BackendExt, CancellationToken, ItemId, Job, JobContext, MemoryBackend,
    Permanent, QueueName, Worker,
};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;

/// The queue the example works on.
pub const QUEUE: &str = "emails";

/// What one traced run left behind.
#[derive(Debug)]
pub struct Traced {
    /// The items whose handler succeeded.
    pub delivered: Vec<ItemId>,
    /// The item whose handler failed for good (it is Dead).
    pub bounced: ItemId,
    /// Every span exported, in the order they ended.
    pub spans: Vec<SpanData>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let traced = traced_run()?;
    for span in &traced.spans {
        let attributes: Vec<String> = span
            .attributes
            .iter()
            .map(|kv| format!("{}={}", kv.key, kv.value))
            .collect();
        println!(
            "{:<9} {:<16} {:<28} {}",
            format!("{:?}", span.span_kind),
            span.name,
            format!("{:?}", span.status),
            attributes.join(" ")
        );
    }
    Ok(())
}

/// Enqueues two mails that go through and one that bounces, and runs a
/// worker until each has ended, with every span exported to an in-memory
/// exporter.
pub fn traced_run() -> Result<Traced, Box<dyn std::error::Error>> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    // Without the layer's own extras (source location, thread, target,
    // busy and idle time), so only the spans' fields show.
    let layer = tracing_opentelemetry::layer()
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_tracer(provider.tracer("leaseq-example"));
    let subscriber = tracing_subscriber::registry().with(layer);
    // For this thread only: the runtime below runs every task on it.
    let ran = tracing::subscriber::with_default(subscriber, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(run_jobs())
    });
    let (delivered, bounced) = ran?;
    provider.force_flush()?;
    let spans = exporter.get_finished_spans()?;
    provider.shutdown()?;
    Ok(Traced {
        delivered,
        bounced,
        spans,
    })
}

async fn run_jobs() -> Result<(Vec<ItemId>, ItemId), Box<dyn std::error::Error>> {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::new());
    let queue = QueueName::new(QUEUE)?;
    let delivered = vec![
        backend.push(&queue, "welcome mail").await?,
        backend.push(&queue, "receipt").await?,
    ];
    let bounced = backend.push(&queue, "bounce").await?;

    let worker = Worker::builder(backend.clone(), QUEUE).build(handler_fn(
        |job: Job, _ctx: JobContext| async move {
            if job.payload.as_ref() == b"bounce" {
                return Err(Permanent::boxed("mailbox does not exist"));
            }
            Ok(())
        },
    ))?;
    let stop = CancellationToken::new();
    let run = tokio::spawn(worker.run(stop.clone()));
    // Until the two are acked and the bounce is Dead (bounded: an example
    // that hangs helps nobody).
    for _ in 0..1_000 {
        let stats = backend.stats(&queue).await?;
        if stats.total() == stats.dead {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.cancel();
    run.await??;
    Ok((delivered, bounced))
}
