//! Runs `examples/otel_traces.rs`: a worker over the memory backend with
//! its spans exported through `tracing-opentelemetry` to an in-memory
//! exporter. The exported spans carry the documented messaging attributes
//! (`leaseq::spans`), kinds and statuses.

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/otel_traces.rs"]
mod example;

use leaseq::spans::{error_types, fields};
use leaseq::ItemId;
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::Value;
use opentelemetry_sdk::trace::SpanData;

/// The attribute `key` of `span`, as text.
fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

fn int_attr(span: &SpanData, key: &str) -> Option<i64> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .and_then(|kv| match kv.value {
            Value::I64(n) => Some(n),
            _ => None,
        })
}

/// The spans whose `messaging.operation.type` is `op`.
fn of_type<'a>(spans: &'a [SpanData], op: &str) -> Vec<&'a SpanData> {
    spans
        .iter()
        .filter(|s| attr(s, fields::OPERATION_TYPE).as_deref() == Some(op))
        .collect()
}

fn for_item<'a>(spans: &[&'a SpanData], id: ItemId) -> &'a SpanData {
    let id = id.to_string();
    let found: Vec<_> = spans
        .iter()
        .filter(|s| attr(s, fields::MESSAGE_ID).as_deref() == Some(id.as_str()))
        .collect();
    assert_eq!(found.len(), 1, "one span for item {id}: {found:#?}");
    found[0]
}

#[test]
fn exported_spans_follow_the_messaging_conventions() {
    let run = example::traced_run().expect("the example runs");
    let spans = &run.spans;
    let queue = example::QUEUE;
    for s in spans {
        assert_eq!(attr(s, fields::SYSTEM).as_deref(), Some("leaseq"), "{s:#?}");
        assert_eq!(
            attr(s, fields::DESTINATION).as_deref(),
            Some(queue),
            "{s:#?}"
        );
    }

    // process: one per job, a consumer span named after the queue.
    let process = of_type(spans, "process");
    assert_eq!(process.len(), 3, "{process:#?}");
    for id in &run.delivered {
        let s = for_item(&process, *id);
        assert_eq!(s.span_kind, SpanKind::Consumer);
        assert_eq!(s.name, format!("process {queue}"));
        assert_eq!(attr(s, fields::OPERATION_NAME).as_deref(), Some("process"));
        assert_eq!(int_attr(s, fields::ATTEMPT), Some(1));
        assert_eq!(s.status, Status::Unset, "{s:#?}");
        assert_eq!(attr(s, fields::ERROR_TYPE), None);
    }
    let failed = for_item(&process, run.bounced);
    assert!(matches!(failed.status, Status::Error { .. }), "{failed:#?}");
    assert_eq!(
        attr(failed, fields::ERROR_TYPE).as_deref(),
        Some(error_types::PERMANENT)
    );

    // receive: the worker's claims, client spans with a batch count; each
    // job links to the claim that leased it.
    let receive = of_type(spans, "receive");
    assert!(!receive.is_empty());
    let mut claimed = 0;
    for s in &receive {
        assert_eq!(s.span_kind, SpanKind::Client);
        assert_eq!(attr(s, fields::OPERATION_NAME).as_deref(), Some("claim"));
        claimed += int_attr(s, fields::BATCH_COUNT).expect("a batch count");
    }
    assert_eq!(claimed, 3, "every job claimed once");
    for s in &process {
        let linked = s.links.iter().any(|l| {
            receive
                .iter()
                .any(|r| r.span_context.span_id() == l.span_context.span_id())
        });
        assert!(linked, "a job links to its claim: {s:#?}");
    }

    // settle: the acks in batches, and the bounce's fail inside its job.
    let settle = of_type(spans, "settle");
    let acked: i64 = settle
        .iter()
        .filter(|s| attr(s, fields::OPERATION_NAME).as_deref() == Some("ack"))
        .map(|s| {
            assert_eq!(s.span_kind, SpanKind::Client);
            int_attr(s, fields::BATCH_COUNT).expect("a batch count")
        })
        .sum();
    assert_eq!(acked, 2, "{settle:#?}");
    let fail = for_item(&settle, run.bounced);
    assert_eq!(attr(fail, fields::OPERATION_NAME).as_deref(), Some("fail"));
    assert_eq!(fail.parent_span_id, failed.span_context.span_id());

    // send: one producer span per enqueue, with the new item's id.
    let send = of_type(spans, "send");
    assert_eq!(send.len(), 3, "{send:#?}");
    for id in run.delivered.iter().chain([&run.bounced]) {
        let s = for_item(&send, *id);
        assert_eq!(s.span_kind, SpanKind::Producer);
        assert_eq!(s.name, format!("enqueue {queue}"));
        assert_eq!(attr(s, fields::OPERATION_NAME).as_deref(), Some("enqueue"));
    }
}
