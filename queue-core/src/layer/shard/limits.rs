//! Global limits over shards: the logical queue's limits are split into one
//! share per shard, each shard enforces its own share in its own atomic
//! claim, and the shares add up to the limit. No claim spans shards, so a
//! split is the only way the sum can hold without a lock across them.

use std::time::Duration;

use crate::{Error, QueueLimits, Rate, Result};

/// Shard `i`'s share of `total` over `shards`: `total / shards`, plus one
/// for the first `total % shards` shards.
fn share(total: u32, shards: u16, i: u16) -> u32 {
    let k = u32::from(shards);
    total / k + u32::from(u32::from(i) < total % k)
}

/// One [`QueueLimits`] per shard whose sum is `limits`. Every share must be
/// at least 1 (a shard with no share could never hand out its items), so a
/// limit below the shard count is refused.
pub(super) fn split(limits: QueueLimits, shards: u16) -> Result<Vec<QueueLimits>> {
    limits.check()?;
    let k = u32::from(shards);
    if let Some(c) = limits.concurrency {
        if c < k {
            return Err(Error::invalid(format!(
                "a concurrency limit of {c} cannot be split over {shards} shards: each shard \
                 enforces its own share and needs at least 1; use a limit of at least {shards} \
                 or fewer shards"
            )));
        }
    }
    if let Some(r) = limits.rate {
        if r.claims() < k {
            return Err(Error::invalid(format!(
                "a rate of {r} cannot be split over {shards} shards: each shard enforces its \
                 own share and needs at least 1 claim per window; allow at least {shards} per \
                 window or use fewer shards"
            )));
        }
    }
    (0..shards)
        .map(|i| {
            Ok(QueueLimits {
                concurrency: limits.concurrency.map(|c| share(c, shards, i)),
                rate: match limits.rate {
                    Some(r) => Some(Rate::new(share(r.claims(), shards, i), r.per())?),
                    None => None,
                },
            })
        })
        .collect()
}

/// The logical queue's limits from the shards' (the sums). Shards that
/// disagree (one limited, another not; different windows) are
/// [`Error::Corrupt`]: a split was only partly written, and setting the
/// limits again repairs it.
pub(super) fn join(parts: &[QueueLimits]) -> Result<QueueLimits> {
    let disagree = |what: &str| Error::Corrupt {
        what: format!(
            "the shards of the queue hold different {what} limits ({parts:?}); set the limits \
             again"
        ),
    };
    let Some(first) = parts.first() else {
        return Ok(QueueLimits::NONE);
    };
    let concurrency = if first.concurrency.is_some() {
        let mut sum = 0u32;
        for p in parts {
            let c = p.concurrency.ok_or_else(|| disagree("concurrency"))?;
            sum = sum.saturating_add(c);
        }
        Some(sum)
    } else if parts.iter().any(|p| p.concurrency.is_some()) {
        return Err(disagree("concurrency"));
    } else {
        None
    };
    let rate = match first.rate {
        Some(r0) => {
            let mut sum = 0u32;
            for p in parts {
                match p.rate {
                    Some(r) if r.per() == r0.per() => sum = sum.saturating_add(r.claims()),
                    _ => return Err(disagree("rate")),
                }
            }
            Some(Rate::new(sum, r0.per())?)
        }
        None if parts.iter().any(|p| p.rate.is_some()) => return Err(disagree("rate")),
        None => None,
    };
    Ok(QueueLimits { concurrency, rate })
}

/// The earliest of the shards' `retry_after`s: the first moment one of them
/// may hand out more.
pub(super) fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(n: u32) -> Rate {
        Rate::new(n, Duration::from_secs(1)).expect("rate")
    }

    #[test]
    fn shares_add_up_and_join_back() {
        let limits = QueueLimits::NONE.concurrency(10).rate(rate(7));
        let parts = split(limits, 4).expect("split");
        let conc: Vec<u32> = parts.iter().filter_map(|p| p.concurrency).collect();
        let claims: Vec<u32> = parts
            .iter()
            .filter_map(|p| p.rate.map(|r| r.claims()))
            .collect();
        assert_eq!(conc, [3, 3, 2, 2]);
        assert_eq!(claims, [2, 2, 2, 1]);
        assert_eq!(join(&parts).expect("join"), limits);
        assert_eq!(
            join(&split(QueueLimits::NONE, 4).expect("none")).expect("join"),
            QueueLimits::NONE
        );
    }

    #[test]
    fn a_limit_below_the_shard_count_is_refused() {
        for limits in [
            QueueLimits::NONE.concurrency(3),
            QueueLimits::NONE.rate(rate(3)),
        ] {
            assert!(matches!(split(limits, 4), Err(Error::InvalidInput { .. })));
        }
        assert_eq!(
            split(QueueLimits::NONE.concurrency(3), 1).expect("one")[0].concurrency,
            Some(3)
        );
    }

    #[test]
    fn shards_that_disagree_are_reported() {
        let parts = [QueueLimits::NONE.concurrency(2), QueueLimits::NONE];
        assert!(matches!(join(&parts), Err(Error::Corrupt { .. })));
        let parts = [
            QueueLimits::NONE.rate(rate(2)),
            QueueLimits::NONE.rate(Rate::new(2, Duration::from_secs(2)).expect("rate")),
        ];
        assert!(matches!(join(&parts), Err(Error::Corrupt { .. })));
    }
}
