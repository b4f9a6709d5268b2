//! Counters a user can export, and per-job events a user can observe.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::ItemId;

/// The names the worker reports through the [`metrics`] facade, each with
/// a `queue` label: one table, also in the crate docs.
pub mod names {
    /// Counter: items claimed.
    pub const CLAIMED: &str = "leaseq_jobs_claimed_total";
    /// Counter: items acked after their handler succeeded.
    pub const ACKED: &str = "leaseq_jobs_acked_total";
    /// Counter: failed jobs released for another attempt.
    pub const RETRIED: &str = "leaseq_jobs_retried_total";
    /// Counter: items sent Dead.
    pub const DEAD: &str = "leaseq_jobs_dead_total";
    /// Counter: leases found lost.
    pub const LEASE_LOST: &str = "leaseq_jobs_lease_lost_total";
    /// Counter: leases the store lost (not counted as lost): unexpired
    /// leases that no reaper or worker took ([`crate::Error::LeaseVanished`]).
    pub const LEASE_VANISHED: &str = "leaseq_jobs_lease_vanished_total";
    /// Counter: corrupt entries removed (self-healing).
    pub const REPAIRED: &str = "leaseq_repairs_total";
    /// Counter: expired leases this worker's reaper recovered.
    pub const REAPED: &str = "leaseq_leases_reaped_total";
    /// Counter: handlers that panicked.
    pub const PANICKED: &str = "leaseq_handler_panics_total";
    /// Counter: leases given back unfinished at shutdown.
    pub const RELEASED: &str = "leaseq_jobs_released_total";
    /// Counter: backend calls that failed.
    pub const BACKEND_ERRORS: &str = "leaseq_backend_errors_total";
    /// Counter: jobs an operator cancelled while they ran.
    pub const CANCELLED: &str = "leaseq_jobs_cancelled_total";
    /// Counter: jobs their handler snoozed.
    pub const SNOOZED: &str = "leaseq_jobs_snoozed_total";
    /// Gauge: handlers running now.
    pub const IN_FLIGHT: &str = "leaseq_jobs_in_flight";
    /// Histogram: handler run time, seconds.
    pub const DURATION: &str = "leaseq_job_duration_seconds";
    /// Histogram: seconds from the item's enqueue to its handler's start,
    /// recorded as the handler starts. The part up to the claim is read on
    /// the backend's clock (the claim's time less the item's
    /// `enqueued_at`), the part after on this process's monotonic clock, so
    /// skew between the two clocks does not enter. For a retried item it
    /// spans every attempt since the enqueue (and a redriven item's time in
    /// Dead).
    pub const WAIT: &str = "leaseq_job_wait_seconds";
    /// Gauge (from [`crate::export_queue_gauges`]): items per state, with a
    /// `state` label too.
    pub const ITEMS: &str = "leaseq_queue_items";
    /// Counter (from [`crate::export_queue_gauges`]): the store's
    /// completion counter per queue ([`crate::QueueStats::completed`]),
    /// every handle's completions, where the backend counts them. It starts
    /// again at 0 after [`crate::Admin::delete_queue`].
    pub const COMPLETED: &str = "leaseq_queue_completed_total";

    /// Every name above, in this order.
    pub const ALL: &[&str] = &[
        CLAIMED,
        ACKED,
        RETRIED,
        DEAD,
        LEASE_LOST,
        LEASE_VANISHED,
        REPAIRED,
        REAPED,
        PANICKED,
        RELEASED,
        BACKEND_ERRORS,
        CANCELLED,
        SNOOZED,
        IN_FLIGHT,
        DURATION,
        WAIT,
        ITEMS,
        COMPLETED,
    ];
}

/// The worker's handles in the installed `metrics` recorder, made once
/// when the worker is built (install the recorder before that).
#[derive(Debug)]
struct Exported {
    claimed: metrics::Counter,
    acked: metrics::Counter,
    retried: metrics::Counter,
    dead: metrics::Counter,
    lease_lost: metrics::Counter,
    lease_vanished: metrics::Counter,
    repaired: metrics::Counter,
    reaped: metrics::Counter,
    panicked: metrics::Counter,
    released: metrics::Counter,
    backend_errors: metrics::Counter,
    cancelled: metrics::Counter,
    snoozed: metrics::Counter,
    in_flight: metrics::Gauge,
    duration: metrics::Histogram,
    wait: metrics::Histogram,
}

impl Exported {
    fn new(queue: &str) -> Self {
        super::metric_help::describe_metrics();
        let q = queue.to_owned();
        let c = |name: &'static str| metrics::counter!(name, "queue" => q.clone());
        Exported {
            claimed: c(names::CLAIMED),
            acked: c(names::ACKED),
            retried: c(names::RETRIED),
            dead: c(names::DEAD),
            lease_lost: c(names::LEASE_LOST),
            lease_vanished: c(names::LEASE_VANISHED),
            repaired: c(names::REPAIRED),
            reaped: c(names::REAPED),
            panicked: c(names::PANICKED),
            released: c(names::RELEASED),
            backend_errors: c(names::BACKEND_ERRORS),
            cancelled: c(names::CANCELLED),
            snoozed: c(names::SNOOZED),
            in_flight: metrics::gauge!(names::IN_FLIGHT, "queue" => q.clone()),
            duration: metrics::histogram!(names::DURATION, "queue" => q.clone()),
            wait: metrics::histogram!(names::WAIT, "queue" => q.clone()),
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    claimed: AtomicU64,
    acked: AtomicU64,
    retried: AtomicU64,
    dead: AtomicU64,
    lease_lost: AtomicU64,
    lease_vanished: AtomicU64,
    repaired: AtomicU64,
    reaped: AtomicU64,
    panicked: AtomicU64,
    released: AtomicU64,
    backend_errors: AtomicU64,
    cancelled: AtomicU64,
    snoozed: AtomicU64,
    exported: std::sync::OnceLock<Exported>,
}

/// A live handle on one worker's counters; clones share them. Read them with
/// [`WorkerMetrics::snapshot`] and export them to any metrics system.
#[derive(Debug, Clone, Default)]
pub struct WorkerMetrics(Arc<Counters>);

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Items claimed.
    pub claimed: u64,
    /// Items acked after their handler succeeded.
    pub acked: u64,
    /// Failed jobs released for another attempt.
    pub retried: u64,
    /// Items this worker sent Dead: handler failures on the last attempt,
    /// permanent errors, and expired leases its reaper found exhausted.
    pub dead: u64,
    /// Leases found lost (by a heartbeat or by the final ack/release/fail).
    pub lease_lost: u64,
    /// Leases the store lost (a failover that lost writes, a purge): found
    /// unexpired, yet taken by no reaper or worker. Not in `lease_lost`.
    pub lease_vanished: u64,
    /// Corrupt index entries removed by claims and reaps (self-healing).
    pub repaired: u64,
    /// Expired leases this worker's reaper sent back to Ready.
    pub reaped: u64,
    /// Handlers that panicked (each also counts as a retry or a death).
    pub panicked: u64,
    /// Leases given back unfinished at shutdown.
    pub released: u64,
    /// Backend calls that failed with a server or connection error.
    pub backend_errors: u64,
    /// Jobs an operator cancelled while they ran ([`crate::Control::cancel`]).
    pub cancelled: u64,
    /// Jobs their handler snoozed ([`crate::Snooze`]).
    pub snoozed: u64,
}

/// Which counter to bump.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counter {
    Claimed,
    Acked,
    Retried,
    Dead,
    LeaseLost,
    LeaseVanished,
    Repaired,
    Reaped,
    Panicked,
    Released,
    BackendErrors,
    Cancelled,
    Snoozed,
}

impl WorkerMetrics {
    /// The counters now.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let c = &self.0;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        MetricsSnapshot {
            claimed: get(&c.claimed),
            acked: get(&c.acked),
            retried: get(&c.retried),
            dead: get(&c.dead),
            lease_lost: get(&c.lease_lost),
            lease_vanished: get(&c.lease_vanished),
            repaired: get(&c.repaired),
            reaped: get(&c.reaped),
            panicked: get(&c.panicked),
            released: get(&c.released),
            backend_errors: get(&c.backend_errors),
            cancelled: get(&c.cancelled),
            snoozed: get(&c.snoozed),
        }
    }

    pub(crate) fn add(&self, counter: Counter, n: u64) {
        let c = &self.0;
        let a = match counter {
            Counter::Claimed => &c.claimed,
            Counter::Acked => &c.acked,
            Counter::Retried => &c.retried,
            Counter::Dead => &c.dead,
            Counter::LeaseLost => &c.lease_lost,
            Counter::LeaseVanished => &c.lease_vanished,
            Counter::Repaired => &c.repaired,
            Counter::Reaped => &c.reaped,
            Counter::Panicked => &c.panicked,
            Counter::Released => &c.released,
            Counter::BackendErrors => &c.backend_errors,
            Counter::Cancelled => &c.cancelled,
            Counter::Snoozed => &c.snoozed,
        };
        a.fetch_add(n, Ordering::Relaxed);
        if let Some(e) = c.exported.get() {
            let h = match counter {
                Counter::Claimed => &e.claimed,
                Counter::Acked => &e.acked,
                Counter::Retried => &e.retried,
                Counter::Dead => &e.dead,
                Counter::LeaseLost => &e.lease_lost,
                Counter::LeaseVanished => &e.lease_vanished,
                Counter::Repaired => &e.repaired,
                Counter::Reaped => &e.reaped,
                Counter::Panicked => &e.panicked,
                Counter::Released => &e.released,
                Counter::BackendErrors => &e.backend_errors,
                Counter::Cancelled => &e.cancelled,
                Counter::Snoozed => &e.snoozed,
            };
            h.increment(n);
        }
    }

    /// Reports through the `metrics` facade too, labelled with `queue`
    /// (the first call wins).
    pub(crate) fn export_as(&self, queue: &str) {
        let _ = self.0.exported.get_or_init(|| Exported::new(queue));
    }

    /// A handler started (`+1`) or ended (`-1`).
    pub(crate) fn in_flight(&self, delta: f64) {
        if let Some(e) = self.0.exported.get() {
            e.in_flight.increment(delta);
        }
    }

    /// A handler ran for `d`.
    pub(crate) fn ran_for(&self, d: Duration) {
        if let Some(e) = self.0.exported.get() {
            e.duration.record(d.as_secs_f64());
        }
    }

    /// A handler started `d` after its item was enqueued.
    pub(crate) fn waited(&self, d: Duration) {
        if let Some(e) = self.0.exported.get() {
            e.wait.record(d.as_secs_f64());
        }
    }

    pub(crate) fn inc(&self, counter: Counter) {
        self.add(counter, 1);
    }
}

/// How one job ended, as far as this worker knows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutcome {
    /// The handler succeeded and the ack went through.
    Acked,
    /// The handler failed; the item was released for another attempt after
    /// `delay`.
    Retried {
        /// The backoff delay given to the release.
        delay: Duration,
        /// The error's text.
        error: String,
    },
    /// The item went Dead.
    Dead {
        /// The reason recorded with it.
        reason: String,
    },
    /// The lease was lost before the result could be recorded: the worker
    /// does not record it. Usually someone else (a reaper, another worker)
    /// holds the item now and it runs again. When an ack's reply was lost
    /// and the lease then expired, the ack may have landed all the same:
    /// once a lease has expired, `lease_fate` cannot tell an ack of this
    /// holder from a later holder's (an acked item leaves no trace), so the
    /// job is reported here and not as acked.
    LeaseLost,
    /// Shutdown's deadline passed first; the lease was given back.
    Released,
    /// An operator cancelled the item while the handler ran
    /// ([`crate::Control::cancel`]): the handler's context was cancelled
    /// and the item ended Cancelled, whatever the handler returned.
    Cancelled,
    /// The handler asked to run again later ([`crate::Snooze`]): the item
    /// waits `delay`, without spending the attempt.
    Snoozed {
        /// How long it waits.
        delay: Duration,
    },
    /// The result could not be recorded because the backend failed; the
    /// lease will expire and a reaper will recover the item.
    Unrecorded {
        /// The backend error's text.
        error: String,
    },
}

/// One job's end, passed to the callback set with
/// [`crate::WorkerBuilder::on_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEvent {
    /// The item.
    pub id: ItemId,
    /// Its attempts, this one included.
    pub attempts: u32,
    /// How it ended.
    pub outcome: JobOutcome,
}

/// The event callback.
pub(crate) type EventFn = Arc<dyn Fn(&JobEvent) + Send + Sync>;

/// Debug for the optional callback.
pub(crate) struct EventSink(pub(crate) Option<EventFn>);

impl EventSink {
    pub(crate) fn emit(&self, id: ItemId, attempts: u32, outcome: JobOutcome) {
        if let Some(f) = &self.0 {
            f(&JobEvent {
                id,
                attempts,
                outcome,
            });
        }
    }
}

impl fmt::Debug for EventSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "EventSink(set)"
        } else {
            "EventSink(none)"
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn all_lists_every_metric_name_once() {
        let declared = crate::declared_consts(include_str!("metrics.rs"), "names");
        assert_eq!(
            declared,
            super::names::ALL,
            "names::ALL must list every name, in order"
        );
    }
}
