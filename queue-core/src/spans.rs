//! The `tracing` spans the worker and the enqueue helpers open, with fields
//! named after the OpenTelemetry semantic conventions for messaging, so an
//! OpenTelemetry layer (`tracing-opentelemetry`) exports them as messaging
//! spans without any mapping.
//!
//! | span | `messaging.operation.type` | `messaging.operation.name` | `otel.kind` | where |
//! |---|---|---|---|---|
//! | `job` | `process` | `process` | `consumer` | one per claimed job, from its claim to its recorded outcome |
//! | `claim` | `receive` | `claim` | `client` | each claim of a worker |
//! | `ack` | `settle` | `ack` | `client` | each batch of acks a worker sends |
//! | `settle` | `settle` | `release`, `fail`, `give_back` | `client` | a worker's other outcomes, inside `job` |
//! | `enqueue` | `send` | `enqueue` | `producer` | [`crate::BackendExt::enqueue_one`] (and `push`), [`crate::TypedQueue`]'s enqueues |
//!
//! Every span has [`fields::SYSTEM`] = `leaseq`, [`fields::DESTINATION`]
//! (the queue) and [`fields::OTEL_NAME`] = `"{operation} {queue}"`. A span
//! about one item has [`fields::MESSAGE_ID`]; one about a batch (claim, ack,
//! a batch enqueue) has [`fields::BATCH_COUNT`]. `job` has
//! [`fields::ATTEMPT`] and links (`follows_from`) to the `claim` that
//! leased it. A failure sets [`fields::OTEL_STATUS`] = `ERROR` and
//! [`fields::ERROR_TYPE`] (one of [`error_types`]).
//!
//! All are at INFO level; an idle worker opens one `claim` span (with a
//! batch count of 0) each time it wakes up to find nothing.

use crate::{Error, QueueName};

/// Field names, as the OpenTelemetry messaging conventions spell them.
pub mod fields {
    /// `messaging.system`: always [`super::SYSTEM`].
    pub const SYSTEM: &str = "messaging.system";
    /// `messaging.operation.type`: `process`, `receive`, `send` or `settle`.
    pub const OPERATION_TYPE: &str = "messaging.operation.type";
    /// `messaging.operation.name`: the leaseq operation (`process`, `claim`,
    /// `ack`, `release`, `fail`, `give_back`, `enqueue`).
    pub const OPERATION_NAME: &str = "messaging.operation.name";
    /// `messaging.destination.name`: the queue.
    pub const DESTINATION: &str = "messaging.destination.name";
    /// `messaging.message.id`: the item's id.
    pub const MESSAGE_ID: &str = "messaging.message.id";
    /// `messaging.batch.message_count`: items in a batch operation.
    pub const BATCH_COUNT: &str = "messaging.batch.message_count";
    /// `otel.name`: the span's name for OpenTelemetry, `"{operation} {queue}"`.
    pub const OTEL_NAME: &str = "otel.name";
    /// `otel.kind`: `consumer`, `producer` or `client`.
    pub const OTEL_KIND: &str = "otel.kind";
    /// `otel.status_code`: `ERROR` when the operation failed (unset
    /// otherwise).
    pub const OTEL_STATUS: &str = "otel.status_code";
    /// `error.type`: why it failed, one of [`super::error_types`].
    pub const ERROR_TYPE: &str = "error.type";
    /// `leaseq.attempt`: the job's attempt, 1 on the first delivery.
    pub const ATTEMPT: &str = "leaseq.attempt";

    /// Every field above, in this order.
    pub const ALL: &[&str] = &[
        SYSTEM,
        OPERATION_TYPE,
        OPERATION_NAME,
        DESTINATION,
        MESSAGE_ID,
        BATCH_COUNT,
        OTEL_NAME,
        OTEL_KIND,
        OTEL_STATUS,
        ERROR_TYPE,
        ATTEMPT,
    ];
}

/// The value of [`fields::SYSTEM`].
pub const SYSTEM: &str = "leaseq";

/// The values of [`fields::ERROR_TYPE`].
pub mod error_types {
    /// The handler returned an error.
    pub const HANDLER: &str = "handler_error";
    /// The handler returned a [`crate::Permanent`] error.
    pub const PERMANENT: &str = "permanent";
    /// The handler ran past its timeout ([`crate::JobTimedOut`]).
    pub const TIMEOUT: &str = "timeout";
    /// The handler panicked.
    pub const PANIC: &str = "panic";
    /// The lease was lost before the result was recorded.
    pub const LEASE_LOST: &str = "lease_lost";
    /// The store lost the lease ([`crate::Error::LeaseVanished`]).
    pub const LEASE_VANISHED: &str = "lease_vanished";
    /// The backend failed a call (its [`crate::Error`] variant otherwise).
    pub const BACKEND: &str = "backend";
    /// The backend refused the call before running it.
    pub const UNAVAILABLE: &str = "unavailable";
    /// The store is full.
    pub const FULL: &str = "full";
    /// The server rejected the call ([`crate::Error::Rejected`]).
    pub const REJECTED: &str = "rejected";
    /// The call was refused as invalid input.
    pub const INVALID_INPUT: &str = "invalid_input";
    /// The backend found corrupt data.
    pub const CORRUPT: &str = "corrupt";
    /// Any other error.
    pub const OTHER: &str = "_OTHER";
}

/// The `error.type` of a backend error.
pub(crate) fn error_type(e: &Error) -> &'static str {
    match e {
        Error::LeaseLost { .. } => error_types::LEASE_LOST,
        Error::LeaseVanished { .. } => error_types::LEASE_VANISHED,
        Error::InvalidInput { .. } => error_types::INVALID_INPUT,
        Error::OutcomeUnknown { .. } => error_types::BACKEND,
        Error::Unavailable { .. } => error_types::UNAVAILABLE,
        Error::Full { .. } => error_types::FULL,
        Error::Rejected { .. } => error_types::REJECTED,
        Error::Corrupt { .. } => error_types::CORRUPT,
        _ => error_types::OTHER,
    }
}

/// A count as the signed integer OpenTelemetry attributes hold (an
/// unsigned value would reach them as text).
pub(crate) fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Marks `span` failed with `error_type`.
pub(crate) fn failed(span: &tracing::Span, error_type: &'static str) {
    span.record(fields::OTEL_STATUS, "ERROR");
    span.record(fields::ERROR_TYPE, error_type);
}

/// Marks `span` failed by `e`, unless `e` is `Ok`; passes `res` on.
pub(crate) fn outcome<T>(span: &tracing::Span, res: crate::Result<T>) -> crate::Result<T> {
    if let Err(e) = &res {
        failed(span, error_type(e));
    }
    res
}

/// The `otel.name`s of the spans a worker opens on one queue, made once
/// per worker rather than formatted again for every job and batch.
#[derive(Debug)]
pub(crate) struct WorkerSpanNames {
    process: String,
    claim: String,
    ack: String,
}

impl WorkerSpanNames {
    /// The names for a worker on `queue`.
    pub(crate) fn new(queue: &QueueName) -> Self {
        WorkerSpanNames {
            process: format!("process {queue}"),
            claim: format!("claim {queue}"),
            ack: format!("ack {queue}"),
        }
    }
}

/// The span of one job, from its claim to its recorded outcome.
pub(crate) fn process(
    names: &WorkerSpanNames,
    queue: &QueueName,
    id: crate::ItemId,
    attempt: u32,
) -> tracing::Span {
    tracing::info_span!(
        "job",
        { fields::OTEL_NAME } = names.process.as_str(),
        { fields::OTEL_KIND } = "consumer",
        { fields::SYSTEM } = SYSTEM,
        { fields::OPERATION_TYPE } = "process",
        { fields::OPERATION_NAME } = "process",
        { fields::DESTINATION } = queue.as_str(),
        { fields::MESSAGE_ID } = %id,
        { fields::ATTEMPT } = i64::from(attempt),
        { fields::OTEL_STATUS } = tracing::field::Empty,
        { fields::ERROR_TYPE } = tracing::field::Empty,
    )
}

/// The span of a worker's claim; record the leases it got with
/// [`batch_count`].
pub(crate) fn receive(names: &WorkerSpanNames, queue: &QueueName) -> tracing::Span {
    tracing::info_span!(
        "claim",
        { fields::OTEL_NAME } = names.claim.as_str(),
        { fields::OTEL_KIND } = "client",
        { fields::SYSTEM } = SYSTEM,
        { fields::OPERATION_TYPE } = "receive",
        { fields::OPERATION_NAME } = "claim",
        { fields::DESTINATION } = queue.as_str(),
        { fields::BATCH_COUNT } = tracing::field::Empty,
        { fields::OTEL_STATUS } = tracing::field::Empty,
        { fields::ERROR_TYPE } = tracing::field::Empty,
    )
}

/// The span of a batch of `n` acks on `queue`.
pub(crate) fn ack_batch(names: &WorkerSpanNames, queue: &QueueName, n: usize) -> tracing::Span {
    tracing::info_span!(
        "ack",
        { fields::OTEL_NAME } = names.ack.as_str(),
        { fields::OTEL_KIND } = "client",
        { fields::SYSTEM } = SYSTEM,
        { fields::OPERATION_TYPE } = "settle",
        { fields::OPERATION_NAME } = "ack",
        { fields::DESTINATION } = queue.as_str(),
        { fields::BATCH_COUNT } = count(n),
        { fields::OTEL_STATUS } = tracing::field::Empty,
        { fields::ERROR_TYPE } = tracing::field::Empty,
    )
}

/// The span of one settling call (`release`, `fail`, `give_back`) on one
/// item.
pub(crate) fn settle(
    operation: &'static str,
    queue: &QueueName,
    id: crate::ItemId,
) -> tracing::Span {
    tracing::info_span!(
        "settle",
        { fields::OTEL_NAME } = format!("{operation} {queue}").as_str(),
        { fields::OTEL_KIND } = "client",
        { fields::SYSTEM } = SYSTEM,
        { fields::OPERATION_TYPE } = "settle",
        { fields::OPERATION_NAME } = operation,
        { fields::DESTINATION } = queue.as_str(),
        { fields::MESSAGE_ID } = %id,
        { fields::OTEL_STATUS } = tracing::field::Empty,
        { fields::ERROR_TYPE } = tracing::field::Empty,
    )
}

/// The span of an enqueue helper's call: `n` items, so a batch count when
/// `n` is not 1 and the item's id once known when it is.
pub(crate) fn send(queue: &QueueName, n: usize) -> tracing::Span {
    let span = tracing::info_span!(
        "enqueue",
        { fields::OTEL_NAME } = format!("enqueue {queue}").as_str(),
        { fields::OTEL_KIND } = "producer",
        { fields::SYSTEM } = SYSTEM,
        { fields::OPERATION_TYPE } = "send",
        { fields::OPERATION_NAME } = "enqueue",
        { fields::DESTINATION } = queue.as_str(),
        { fields::MESSAGE_ID } = tracing::field::Empty,
        { fields::BATCH_COUNT } = tracing::field::Empty,
        { fields::OTEL_STATUS } = tracing::field::Empty,
        { fields::ERROR_TYPE } = tracing::field::Empty,
    );
    if n != 1 {
        span.record(fields::BATCH_COUNT, count(n));
    }
    span
}

/// Enqueues `items` on `backend` inside a [`send`] span.
pub(crate) async fn enqueue<B: crate::Backend + ?Sized>(
    backend: &B,
    queue: &QueueName,
    items: Vec<crate::NewItem>,
) -> crate::Result<Vec<crate::Enqueued>> {
    use tracing::Instrument;
    let span = send(queue, items.len());
    let res = backend.enqueue(queue, items).instrument(span.clone()).await;
    if let Ok([one]) = res.as_deref() {
        span.record(fields::MESSAGE_ID, tracing::field::display(one.id));
    }
    outcome(&span, res)
}

#[cfg(test)]
mod tests {
    #[test]
    fn all_lists_every_field_once() {
        let declared = crate::declared_consts(include_str!("spans.rs"), "fields");
        assert_eq!(
            declared,
            super::fields::ALL,
            "fields::ALL must list every field, in order"
        );
    }
}
