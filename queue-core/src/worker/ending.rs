//! How a job's end is told: its span, the worker's counters, the event a
//! user observes and the log line. Used by the job itself and by the ack
//! batcher, which finishes the jobs it acks.

use super::metrics::{Counter, JobOutcome};
use super::shared::Shared;
use crate::spans::{self, error_types};
use crate::ItemId;

/// The job a report is about: its item, its attempt and its `process` span.
#[derive(Debug)]
pub(crate) struct JobTag {
    pub(crate) id: ItemId,
    pub(crate) attempts: u32,
    pub(crate) span: tracing::Span,
}

impl JobTag {
    /// Marks the job's span as failed with `error_type`.
    pub(crate) fn failed(&self, error_type: &'static str) {
        spans::failed(&self.span, error_type);
    }

    /// The ack landed: the work is done.
    pub(crate) fn acked(&self, shared: &Shared) {
        tracing::debug!(parent: &self.span, "acked");
        shared
            .events
            .emit(self.id, self.attempts, JobOutcome::Acked);
    }

    /// The lease was gone when the result was to be recorded. `vanished`:
    /// the store lost it (no reaper or worker took it), so the item may come
    /// back, or may be gone for good.
    pub(crate) fn lost_before_recording(&self, shared: &Shared, vanished: bool) {
        if vanished {
            self.failed(error_types::LEASE_VANISHED);
            shared.metrics.inc(Counter::LeaseVanished);
            tracing::error!(
                parent: &self.span,
                "lease vanished before the result was recorded: the store lost it (a failover that \
                 lost writes, an older snapshot), or it was purged or removed; result discarded"
            );
        } else {
            self.failed(error_types::LEASE_LOST);
            shared.metrics.inc(Counter::LeaseLost);
            tracing::warn!(parent: &self.span, "lease lost before the result was recorded: a reaper took it after it expired (the job may run again)");
        }
        self.lease_lost(shared);
    }

    /// The job ends without a result of its own (its lease was lost while
    /// it ran, and the loss was counted then).
    pub(crate) fn lease_lost(&self, shared: &Shared) {
        shared
            .events
            .emit(self.id, self.attempts, JobOutcome::LeaseLost);
    }

    /// The backend could not record the result; the lease will expire and
    /// a reaper will recover the item.
    pub(crate) fn not_recorded(&self, shared: &Shared, error: String) {
        tracing::error!(parent: &self.span, error = %error, "could not record the job's result; a reaper will recover the item");
        shared
            .events
            .emit(self.id, self.attempts, JobOutcome::Unrecorded { error });
    }

    /// A settle call failed: lost lease or a backend error.
    pub(crate) fn unrecorded(&self, shared: &Shared, e: crate::Error) {
        if e.is_lease_lost() {
            self.lost_before_recording(shared, e.is_lease_vanished());
        } else {
            self.failed(spans::error_type(&e));
            self.not_recorded(shared, e.to_string());
        }
    }
}
