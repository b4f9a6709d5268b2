//! The test hooks' own contract, checked around the model's hook steps: a
//! hook that changes more than it should is named as the hook at fault,
//! not as the read that later shows the damage.

use leaseq_core::{Backend, ItemId, ItemState, QueueName, Timestamp};

use crate::outcome::OrFail;
use crate::{Rule, Violation};

/// The most leases a step reads back.
const PEEK_ALL: usize = 10_000;

const RULE: Rule = Rule::Contract("TestHooks::expire_leases");

/// The leases of `q` already expired on the backend's clock, with their
/// expiry, read before an `expire_leases` hook.
pub(crate) async fn expired_leases(
    b: &dyn Backend,
    q: &QueueName,
) -> Result<Vec<(ItemId, Timestamp)>, Violation> {
    let now = b.now().await.or_fail(RULE, "now before the hook")?;
    let leased = b
        .peek(q, ItemState::Leased, PEEK_ALL)
        .await
        .or_fail(RULE, "peek(leased) before the hook")?;
    Ok(leased
        .into_iter()
        .filter_map(|i| i.due_at.filter(|at| *at <= now).map(|at| (i.id, at)))
        .collect())
}

/// Fails unless every lease in `before` (expired before the hook ran) kept
/// its expiry: the hook touches live leases only.
pub(crate) async fn untouched(
    b: &dyn Backend,
    q: &QueueName,
    before: &[(ItemId, Timestamp)],
) -> Result<(), Violation> {
    for (id, was) in before {
        let info = match b.item(q, *id).await {
            Ok(info) => info,
            Err(leaseq_core::Error::NotFound { .. }) => continue,
            Err(e) => {
                return Err(Violation::new(
                    RULE,
                    format!("item({id}) after the hook failed: {e}"),
                ))
            }
        };
        if info.state == ItemState::Leased && info.due_at != Some(*was) {
            return Err(Violation::new(
                RULE,
                format!(
                    "the expire_leases hook touched a lease that had already expired: item {id} expired at {was}, and after the hook its expiry is {:?}. The hook must make live leases expired and leave expired ones (and their expiry) as they are",
                    info.due_at
                ),
            ));
        }
    }
    Ok(())
}
