//! What the model expects of `recover_claim`: every item whose current
//! token belongs to the spec's family (live, or expired but not yet reaped
//! or claimed), in token (claim) order, each lease as the claim returned
//! it, an expired one renewed to now + ttl; nothing claimed.

use leaseq_core::{ClaimSpec, Claimed, Error, ItemId, LeaseToken, Result};

use super::state::{undecidable, Model, Slot};
use super::window::Window;
use crate::outcome::ensure;
use crate::{Rule, Violation};

impl Model {
    /// `recover_claim(spec)` at `now` answered `got`. A backend without it
    /// is not judged.
    pub fn recover_claim(
        &mut self,
        spec: &ClaimSpec,
        now: Window,
        got: &Result<Claimed>,
    ) -> Result<(), Violation> {
        let rule = Rule::Contract("recover_claim");
        let got = match got {
            Err(Error::Unsupported { .. }) => return Ok(()),
            Err(e) => return Err(Violation::new(rule, format!("recover_claim failed: {e}"))),
            Ok(c) => c,
        };
        let mut want: Vec<(LeaseToken, ItemId)> = Vec::new();
        for (id, e) in self.items() {
            if let Slot::Leased { token, expires } = &e.slot {
                if !spec.owns(*token) {
                    continue;
                }
                match (self.lease_traces.any(), expires.passed_at(now)) {
                    (true, _) | (false, Some(false)) => want.push((*token, *id)),
                    (false, Some(true)) => {}
                    (false, None) => {
                        return Err(undecidable(format!(
                            "a lease expiry {expires} at now {now}"
                        )))
                    }
                }
            }
        }
        want.sort_by_key(|(t, _)| t.as_u128());
        let seen: Vec<(LeaseToken, ItemId)> =
            got.leases.iter().map(|l| (l.token(), l.id())).collect();
        ensure!(
            seen == want,
            rule,
            "recover_claim of spec {} returned (token, id) {seen:?}; the live leases of its \
             family, in claim order, are {want:?}",
            spec.request()
        );
        let renewed = now.plus(spec.ttl().as_millis());
        for l in &got.leases {
            let e = &self.items()[&l.id()];
            e.carried_by(l, rule, "recover_claim")?;
            let Slot::Leased { token, expires } = e.slot.clone() else {
                continue;
            };
            let at = l.expires_at.as_millis();
            // A live lease keeps its expiry; an expired one is renewed; at
            // the edge either.
            let ok = match expires.passed_at(now) {
                Some(false) => expires.contains(at),
                Some(true) => renewed.contains(at),
                None => expires.contains(at) || renewed.contains(at),
            };
            ensure!(
                ok,
                rule,
                "recover_claim returned item {} expiring at {}; its lease expires at {expires}, \
                 renewed (if expired) at now + ttl = {renewed}",
                l.id(),
                l.expires_at
            );
            if let Some(entry) = self.items.get_mut(&l.id()) {
                entry.slot = Slot::Leased {
                    token,
                    expires: Window::exact(at),
                };
            }
        }
        Ok(())
    }
}
