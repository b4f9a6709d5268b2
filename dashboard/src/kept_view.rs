//! Kept finished items and retention policies as the page shows them:
//! ids as strings, payloads and results as text or hex, ages in seconds.

use std::time::Duration;

use leaseq_core::{Finished, Keep, Retention};
use serde::{Deserialize, Serialize};

use crate::view::PayloadView;

/// One kept finished item, its payload and result cut to a preview.
#[derive(Debug, Serialize)]
pub(crate) struct FinishedView {
    id: String,
    /// `completed` or `cancelled`.
    ending: &'static str,
    /// When it ended (ms since the epoch, the backend's clock).
    finished_at_ms: u64,
    enqueued_at_ms: u64,
    attempts: u32,
    last_error: Option<String>,
    payload: PayloadView,
    /// What its handler set with `JobContext::set_result`; `None` when it
    /// set nothing or the item was cancelled.
    result: Option<PayloadView>,
}

impl FinishedView {
    pub(crate) fn new(f: &Finished, preview: usize) -> Self {
        Self {
            id: f.id.to_string(),
            ending: f.ending.as_str(),
            finished_at_ms: f.finished_at.as_millis(),
            enqueued_at_ms: f.enqueued_at.as_millis(),
            attempts: f.attempts,
            last_error: f.last_error.clone(),
            payload: PayloadView::new(&f.payload, preview),
            result: f.result.as_ref().map(|r| PayloadView::new(r, preview)),
        }
    }
}

/// How many items of one ending a queue keeps, as JSON: `null` bounds are
/// no bound; `keeps` is false when nothing is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeepView {
    pub(crate) max_age_secs: Option<u64>,
    pub(crate) max_count: Option<u64>,
    #[serde(default)]
    pub(crate) keeps: bool,
}

impl KeepView {
    pub(crate) fn new(keep: Keep) -> Self {
        Self {
            // A sub-second age shows as a whole second: ages are set in
            // seconds here and by the tool.
            max_age_secs: keep
                .max_age
                .map(|a| a.as_secs() + u64::from(a.subsec_nanos() > 0)),
            max_count: keep.max_count,
            keeps: keep.keeps_any(),
        }
    }

    /// The policy this stands for (`keeps` is not read: bounds say it).
    pub(crate) fn keep(self) -> Keep {
        Keep {
            max_age: self.max_age_secs.map(Duration::from_secs),
            max_count: self.max_count,
        }
    }
}

/// A queue's retention policy as JSON.
#[derive(Debug, Serialize)]
pub(crate) struct RetentionView {
    completed: KeepView,
    cancelled: KeepView,
    dead: KeepView,
    /// False when the queue keeps no finished item (the default).
    keeps_any: bool,
}

impl RetentionView {
    pub(crate) fn new(r: &Retention) -> Self {
        Self {
            completed: KeepView::new(r.completed),
            cancelled: KeepView::new(r.cancelled),
            dead: KeepView::new(r.dead),
            keeps_any: r.keeps_any(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_round_trips_through_its_view() {
        for keep in [
            Keep::NOTHING,
            Keep::FOREVER,
            Keep::count(7),
            Keep::for_age(Duration::from_secs(3600)).at_most(10),
        ] {
            let view = KeepView::new(keep);
            assert_eq!(view.keep(), keep);
            assert_eq!(view.keeps, keep.keeps_any());
        }
    }

    #[test]
    fn a_sub_second_age_rounds_up_not_to_nothing() {
        let view = KeepView::new(Keep::for_age(Duration::from_millis(1500)));
        assert_eq!(view.max_age_secs, Some(2));
        assert!(view.keep().keeps_any());
    }
}
