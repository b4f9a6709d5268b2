//! The History group in the model: with every ending kept (the driver sets
//! `Keep::FOREVER` for completed and cancelled items when the backend
//! offers History), the kept items are exactly the items that ended by an
//! ack or a `complete` (Completed, or Cancelled when a cancel was
//! requested) or by a cancel, and that no purge took since.

use leaseq_core::{Finished, Result};

use super::state::Model;
use crate::outcome::ensure;
use crate::{Rule, Violation};

const RULE: Rule = Rule::Contract("History");

impl Model {
    /// `finished(None, limit)` with a limit over every kept item answered
    /// `got`.
    pub fn finished(&self, got: &Result<Vec<Finished>>) -> Result<(), Violation> {
        let Some(kept) = &self.kept else {
            return Ok(());
        };
        let list = got
            .as_ref()
            .map_err(|e| Violation::new(RULE, format!("finished failed: {e}")))?;
        let seen: std::collections::BTreeMap<_, _> =
            list.iter().map(|f| (f.id, f.ending)).collect();
        ensure!(
            seen.len() == list.len(),
            RULE,
            "finished listed an item twice: {:?}",
            list.iter().map(|f| f.id).collect::<Vec<_>>()
        );
        ensure!(
            &seen == kept,
            RULE,
            "finished listed {seen:?}; the items that ended since the last purge are {kept:?}"
        );
        let newest_first = list
            .windows(2)
            .all(|w| (w[0].finished_at, w[0].id) >= (w[1].finished_at, w[1].id));
        ensure!(newest_first, RULE, "finished did not list newest first");
        Ok(())
    }
}
