//! What the model expects of `lease_fate`: Held while the key's token
//! holds its item; else Finished with the item's state (or `None` when it
//! is gone) when asked with a `held_until` still ahead; else Lost when a
//! reap took the lease; else, with lease traces, Finished when the lease's
//! own call ended it within [`leaseq_core::limits::FINISH_MEMORY`]; else
//! Lost (takeover traces: either, see [`LeaseTraces::Takeovers`]).

use leaseq_core::limits::{millis_ceil, FINISH_MEMORY};
use leaseq_core::{Error, ItemState, LeaseFate, LeaseKey, LeaseTraces, Result};

use super::state::Model;
use super::window::Window;
use crate::outcome::ensure;
use crate::{Rule, Violation};

impl Model {
    /// `lease_fate(key, held_until)` at `now` answered `got`; `ahead`:
    /// `held_until` was surely after the call's now (else surely at or
    /// before it). A backend without `lease_fate` is not judged.
    pub fn lease_fate(
        &self,
        key: &LeaseKey,
        ahead: bool,
        now: Window,
        got: &Result<LeaseFate>,
    ) -> Result<(), Violation> {
        let got = match got {
            Err(Error::Unsupported { .. }) => return Ok(()),
            Err(e) => {
                return Err(Violation::new(
                    Rule::Contract("lease_fate"),
                    format!("lease_fate of {} failed: {e}", key.id),
                ))
            }
            Ok(f) => f,
        };
        // The states the item may show at `now`: a Scheduled item whose
        // due time falls within the call's window may show either.
        let states: Vec<Option<ItemState>> = match self.items().get(&key.id) {
            None => vec![None],
            Some(e) => match Self::shown(e, now) {
                Ok(state) => vec![Some(state)],
                Err(_) => vec![Some(ItemState::Ready), Some(ItemState::Scheduled)],
            },
        };
        let finished: Vec<LeaseFate> = states
            .into_iter()
            .map(|state| LeaseFate::Finished { state })
            .collect();
        let memory = millis_ceil(FINISH_MEMORY);
        // Whether a trace of the key's own call is kept: surely, surely
        // not, or either (its memory runs out within the call's window).
        let traced = self
            .traces
            .get(&(key.id, key.token))
            .filter(|_| self.lease_traces.any())
            .map(|at| at.plus(memory).passed_at(now));
        // The driver asks with `held_until` its last reading of the clock:
        // within the traces' memory of it, where the contract is exact.
        let allowed: Vec<LeaseFate> = if self.is_current(key) {
            vec![LeaseFate::Held]
        } else if ahead {
            finished
        } else if self.taken.contains(&(key.id, key.token)) {
            vec![LeaseFate::Lost]
        } else if traced == Some(Some(false)) {
            finished
        } else if traced == Some(None) || self.lease_traces == LeaseTraces::Takeovers {
            // Takeover traces cannot tell a forged, removed or purged
            // lease (or one whose own call ended it long ago) from one
            // its own call ended: either answer.
            finished.into_iter().chain([LeaseFate::Lost]).collect()
        } else {
            vec![LeaseFate::Lost]
        };
        ensure!(
            allowed.contains(got),
            Rule::Contract("lease_fate"),
            "lease_fate of item {} (token {}) asked with held_until {} now answered {got:?}; \
             expected one of {allowed:?}",
            key.id,
            key.token,
            if ahead { "ahead of" } else { "at or before" }
        );
        Ok(())
    }
}
