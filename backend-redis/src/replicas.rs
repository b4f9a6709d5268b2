//! Waiting for replicas after writes ([`crate::RedisOptions::wait_for_replicas`]):
//! which scripts wait, and what a wait that fell short is reported as.

use std::fmt;

use leaseq_core::{Error, QueueName, Result};

use crate::client::{ClientError, Reply, Script};
use crate::ReplicaWait;

/// Scripts that only read (their repairs and quarantines aside, which no
/// caller's `Ok` depends on), and the events gate (`events_on`: a key with
/// an expiry that its process renews, which a failover may lose like an
/// event): they do not wait. Every other script writes, or (`lease_fate`,
/// `recover_claim`) confirms an earlier write that the caller will report
/// as done, and waits.
const READS: &[&str] = &[
    "time",
    "stats",
    "peek",
    "item",
    "limits_get",
    "schedule_get",
    "queues_registry",
    "hook_snapshot",
    "events_on",
];

/// Whether `script` waits for replicas when a wait is configured.
pub(crate) fn waits(script: &Script) -> bool {
    !READS.contains(&script.name())
}

/// A write the master applied that fewer replicas than asked acknowledged
/// in time: a forced failover to one of the others would lose it.
#[derive(Debug)]
pub(crate) struct TooFewReplicas {
    acked: i64,
    wait: ReplicaWait,
}

impl fmt::Display for TooFewReplicas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} replicas acknowledged the write within {:?}",
            self.acked.max(0),
            self.wait.replicas(),
            self.wait.timeout()
        )
    }
}

impl std::error::Error for TooFewReplicas {}

/// The outcome of a script followed by `WAIT`: its reply when enough
/// replicas acknowledged it; otherwise [`Error::OutcomeUnknown`] (it ran on the
/// master, and may or may not survive a failover: settle it by its
/// identity, as after a lost reply).
pub(crate) fn judge(
    op: &str,
    queue: &QueueName,
    wait: ReplicaWait,
    reply: Reply,
    acked: std::result::Result<i64, ClientError>,
) -> Result<Reply> {
    let message = format!(
        "redis {op} on queue {queue}: applied on the master, not known to be on {} replica(s)",
        wait.replicas()
    );
    match acked {
        Ok(n) if n >= i64::from(wait.replicas()) => Ok(reply),
        Ok(n) => Err(Error::outcome_unknown(
            message,
            TooFewReplicas { acked: n, wait },
        )),
        Err(e) => Err(Error::outcome_unknown(message, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn wait(n: u32) -> ReplicaWait {
        crate::RedisOptions::new("redis://h:1")
            .wait_for_replicas(n, Duration::from_millis(50))
            .replica_wait()
            .expect("set")
    }

    #[test]
    fn a_write_is_ok_only_once_enough_replicas_acknowledged_it() {
        let q = QueueName::new("q").expect("valid");
        let ok = judge("ack", &q, wait(1), Reply::Int(1), Ok(2));
        assert!(matches!(ok, Ok(Reply::Int(1))), "{ok:?}");
        let short = judge("ack", &q, wait(2), Reply::Int(1), Ok(1)).expect_err("short");
        assert!(short.may_have_applied(), "{short:?}");
        let source = std::error::Error::source(&short).expect("kept").to_string();
        assert!(source.contains("1 of 2 replicas"), "{source}");
        let failed = judge(
            "ack",
            &q,
            wait(1),
            Reply::Int(1),
            Err(ClientError::transport("reset")),
        );
        assert!(
            matches!(failed, Err(Error::OutcomeUnknown { .. })),
            "{failed:?}"
        );
    }

    #[test]
    fn reads_do_not_wait_and_writes_and_probes_do() {
        let s = crate::scripts::Scripts::new();
        for script in [&s.stats, &s.peek, &s.item, &s.time, &s.events_on] {
            assert!(!waits(script), "{}", script.name());
        }
        for script in [
            &s.enqueue,
            &s.ack_many,
            &s.claim,
            &s.lease_fate,
            &s.recover_claim,
        ] {
            assert!(waits(script), "{}", script.name());
        }
    }
}
