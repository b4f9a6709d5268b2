//! What the model expects of `recover_claim`: every item whose current
//! token belongs to the spec's family and whose lease is live, in token
//! (claim) order, each lease as the claim returned it; nothing claimed.

use leaseq_core::{ClaimSpec, Claimed, Error, ItemId, LeaseToken, Result};

use super::state::{undecidable, Model, Slot};
use super::window::Window;
use crate::outcome::ensure;
use crate::{Rule, Violation};

impl Model {
    /// `recover_claim(spec)` at `now` answered `got`. A backend without it
    /// is not judged.
    pub fn recover_claim(
        &self,
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
                match expires.passed_at(now) {
                    Some(false) => want.push((*token, *id)),
                    Some(true) => {}
                    None => {
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
        for l in &got.leases {
            let e = &self.items()[&l.id()];
            e.carried_by(l, rule, "recover_claim")?;
            if let Slot::Leased { expires, .. } = &e.slot {
                ensure!(
                    expires.contains(l.expires_at.as_millis()),
                    rule,
                    "recover_claim returned item {} expiring at {}, its lease expires at {expires}",
                    l.id(),
                    l.expires_at
                );
            }
        }
        Ok(())
    }
}
