//! Every metric's kind, unit and help text, given to the installed
//! `metrics` recorder, which prints them (Prometheus' `# HELP` lines).

use metrics::Unit;

use super::metrics::names;

/// How a metric is reported.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Each name of [`names::ALL`], in its order, with what it measures.
const HELP: &[(&str, Kind, Unit, &str)] = &[
    (
        names::CLAIMED,
        Kind::Counter,
        Unit::Count,
        "Items this worker claimed.",
    ),
    (
        names::ACKED,
        Kind::Counter,
        Unit::Count,
        "Items acked after their handler succeeded.",
    ),
    (
        names::RETRIED,
        Kind::Counter,
        Unit::Count,
        "Failed jobs released for another attempt.",
    ),
    (
        names::DEAD,
        Kind::Counter,
        Unit::Count,
        "Items this worker sent Dead.",
    ),
    (
        names::LEASE_LOST,
        Kind::Counter,
        Unit::Count,
        "Leases found lost (another holder may run the item).",
    ),
    (
        names::LEASE_VANISHED,
        Kind::Counter,
        Unit::Count,
        "Leases the store lost: unexpired, yet taken by no reaper or worker.",
    ),
    (
        names::REPAIRED,
        Kind::Counter,
        Unit::Count,
        "Corrupt index entries removed by claims and reaps.",
    ),
    (
        names::REAPED,
        Kind::Counter,
        Unit::Count,
        "Expired leases this worker's reaper recovered.",
    ),
    (
        names::PANICKED,
        Kind::Counter,
        Unit::Count,
        "Handlers that panicked.",
    ),
    (
        names::RELEASED,
        Kind::Counter,
        Unit::Count,
        "Leases given back unfinished at shutdown.",
    ),
    (
        names::BACKEND_ERRORS,
        Kind::Counter,
        Unit::Count,
        "Backend calls that failed.",
    ),
    (
        names::CANCELLED,
        Kind::Counter,
        Unit::Count,
        "Jobs an operator cancelled while they ran.",
    ),
    (
        names::SNOOZED,
        Kind::Counter,
        Unit::Count,
        "Jobs their handler snoozed (no attempt spent).",
    ),
    (
        names::IN_FLIGHT,
        Kind::Gauge,
        Unit::Count,
        "Handlers running now.",
    ),
    (
        names::DURATION,
        Kind::Histogram,
        Unit::Seconds,
        "Handler run time in seconds.",
    ),
    (
        names::WAIT,
        Kind::Histogram,
        Unit::Seconds,
        "Seconds from the item's enqueue to its handler's start, across every attempt.",
    ),
    (
        names::ITEMS,
        Kind::Gauge,
        Unit::Count,
        "Items per queue and state, sampled from the store.",
    ),
    (
        names::COMPLETED,
        Kind::Counter,
        Unit::Count,
        "Items completed per queue, by every worker, as the store counts them.",
    ),
];

/// Gives the installed `metrics` recorder every leaseq metric's help text
/// and unit; a Prometheus exporter prints them as `# HELP` lines. Workers
/// and [`crate::export_queue_gauges`] call it as they start; call it
/// yourself to describe the metrics before either runs. Install the
/// recorder first: a description given to no recorder is lost.
pub fn describe_metrics() {
    for &(name, kind, unit, help) in HELP {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, unit, help),
            Kind::Gauge => metrics::describe_gauge!(name, unit, help),
            Kind::Histogram => metrics::describe_histogram!(name, unit, help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_help_in_the_order_of_all() {
        let described: Vec<&str> = HELP.iter().map(|h| h.0).collect();
        assert_eq!(described, names::ALL);
        for (name, _, _, help) in HELP {
            assert!(help.ends_with('.') && help.len() > 10, "{name}: {help:?}");
        }
    }
}
