//! The Control group in the model: cancel (at once, or requested and ended
//! by whatever ends the lease), pause and resume, snooze and run now.

use leaseq_core::{Cancelled, Error, ItemId, LeaseKey, Released, Result};

use super::state::{undecidable, Model, Note, Slot};
use super::window::Window;
use crate::outcome::ensure;
use crate::{Rule, Violation};

const CANCEL: Rule = Rule::Contract("cancel");

impl Model {
    /// Ends the item `id` when a cancel was requested: gone, as a
    /// cancelled item is. Returns whether it ended.
    pub(crate) fn end_if_cancelled(&mut self, id: ItemId) -> bool {
        if !self.items.get(&id).is_some_and(|e| e.cancel_requested) {
            return false;
        }
        self.finish(id, leaseq_core::Ending::Cancelled);
        true
    }

    /// A release or snooze of a cancel-requested lease must answer
    /// `Released::Cancelled`.
    pub(crate) fn answered_cancelled(
        key: &LeaseKey,
        op: &str,
        got: Released,
    ) -> Result<(), Violation> {
        ensure!(
            got == Released::Cancelled,
            CANCEL,
            "{op} of the cancel-requested item {} answered {got:?}; expected Cancelled",
            key.id
        );
        Ok(())
    }

    /// `cancel(id)` at `now` answered `got`.
    pub fn cancel(
        &mut self,
        id: ItemId,
        now: Window,
        got: &Result<Cancelled>,
    ) -> Result<(), Violation> {
        let Some(e) = self.items.get_mut(&id) else {
            return match got {
                Err(Error::NotFound { .. }) => Ok(()),
                other => Err(Violation::new(
                    CANCEL,
                    format!("cancel of {id}, no longer in the queue, answered {other:?}; expected NotFound"),
                )),
            };
        };
        if let Slot::Leased { .. } = e.slot {
            ensure!(
                matches!(got, Ok(Cancelled::Requested)),
                CANCEL,
                "cancel of the leased item {id} answered {got:?}; expected Requested"
            );
            e.cancel_requested = true;
            return Ok(());
        }
        let was = Self::shown(e, now)?;
        ensure!(
            matches!(got, Ok(Cancelled::Now { was: w }) if *w == was),
            CANCEL,
            "cancel of {id} in {:?} answered {got:?}; expected Now {{ was: {was:?} }}",
            e.slot
        );
        self.finish(id, leaseq_core::Ending::Cancelled);
        Ok(())
    }

    /// `pause` (`true`) or `resume` answered `got`.
    pub fn pause(&mut self, pause: bool, got: &Result<()>) -> Result<(), Violation> {
        ensure!(
            got.is_ok(),
            Rule::Contract("pause"),
            "{} failed: {got:?}",
            if pause { "pause" } else { "resume" }
        );
        self.paused = pause;
        Ok(())
    }

    /// `snooze(key, delay)` at `now` answered `got`: back to wait without
    /// spending the attempt, never Dead.
    pub fn snooze(
        &mut self,
        key: &LeaseKey,
        delay_ms: u64,
        now: Window,
        got: &Result<Released>,
    ) -> Result<(), Violation> {
        if !self.is_current(key) {
            return Self::expect_lost(key, "snooze", got);
        }
        let answered = *Self::expect_ok(key, "snooze", got)?;
        self.traces.insert((key.id, key.token), now);
        if self.end_if_cancelled(key.id) {
            return Self::answered_cancelled(key, "snooze", answered);
        }
        let want = if delay_ms == 0 {
            Released::Ready
        } else {
            Released::Scheduled
        };
        ensure!(
            answered == want,
            Rule::Contract("snooze"),
            "snooze of {} (delay {delay_ms}ms) answered {answered:?}; expected {want:?}",
            key.id
        );
        let e = self
            .items
            .get_mut(&key.id)
            .ok_or_else(|| undecidable(format!("{} is not modelled", key.id)))?;
        e.attempts = e.attempts.saturating_sub(1);
        e.note = Note::Free;
        e.slot = match want {
            Released::Ready => Slot::Ready,
            _ => Slot::Scheduled {
                due: now.plus(delay_ms),
            },
        };
        Ok(())
    }

    /// `run_now(id)` at `now` answered `got`.
    pub fn run_now(
        &mut self,
        id: ItemId,
        now: Window,
        got: &Result<bool>,
    ) -> Result<(), Violation> {
        let rule = Rule::Contract("run_now");
        let Some(e) = self.items.get_mut(&id) else {
            return match got {
                Err(Error::NotFound { .. }) => Ok(()),
                other => Err(Violation::new(
                    rule,
                    format!("run_now of {id}, no longer in the queue, answered {other:?}; expected NotFound"),
                )),
            };
        };
        let waiting = matches!(e.slot, Slot::Scheduled { .. }) && !Self::claimable(e, now)?;
        ensure!(
            matches!(got, Ok(moved) if *moved == waiting),
            rule,
            "run_now of {id} in {:?} answered {got:?}; expected Ok({waiting})",
            e.slot
        );
        if let Slot::Scheduled { .. } = e.slot {
            // A due item is Ready already; either way it is claimable now.
            e.slot = Slot::Ready;
        }
        Ok(())
    }
}
