//! Which shards a claim visits, in which order, and for how many items.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A counter that starts each operation at the next shard, so no shard
/// starves.
#[derive(Debug, Default)]
pub(super) struct Rotation(AtomicUsize);

impl Rotation {
    /// Every shard once, starting at the next one in turn.
    pub(super) fn order(&self, shards: u16) -> Vec<u16> {
        let k = usize::from(shards.max(1));
        let start = self.0.fetch_add(1, Ordering::Relaxed) % k;
        (0..k)
            .map(|j| u16::try_from((start + j) % k).unwrap_or(0))
            .collect()
    }

    /// The next shard in turn (round-robin placement).
    pub(super) fn next(&self, shards: u16) -> u16 {
        let k = usize::from(shards.max(1));
        u16::try_from(self.0.fetch_add(1, Ordering::Relaxed) % k).unwrap_or(0)
    }
}

/// Splits `want` items over the `pending` shards (in order) for one round
/// of concurrent claims: the shares add up to exactly `want`, so a round
/// never leases more than the claim returns. When `want` is smaller than
/// the number of shards, the first `want` shards get one each.
pub(super) fn shares(want: u32, pending: &[u16]) -> Vec<(u16, u32)> {
    let n = u32::try_from(pending.len()).unwrap_or(u32::MAX);
    if want == 0 || n == 0 {
        return Vec::new();
    }
    let (base, extra) = (want / n, want % n);
    pending
        .iter()
        .enumerate()
        .map(|(i, &shard)| {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            (shard, base + u32::from(i < extra))
        })
        .filter(|&(_, share)| share > 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_want() {
        for want in 0..40u32 {
            for k in 1..9u16 {
                let pending: Vec<u16> = (0..k).collect();
                let s = shares(want, &pending);
                assert_eq!(s.iter().map(|&(_, n)| n).sum::<u32>(), want);
                assert!(s.len() <= usize::from(k));
                let (lo, hi) = (
                    s.iter().map(|&(_, n)| n).min().unwrap_or(0),
                    s.iter().map(|&(_, n)| n).max().unwrap_or(0),
                );
                assert!(hi - lo <= 1, "uneven split {s:?}");
            }
        }
    }

    #[test]
    fn rotation_starts_at_each_shard_in_turn() {
        let r = Rotation::default();
        let starts: Vec<u16> = (0..8).map(|_| r.order(4)[0]).collect();
        assert_eq!(starts, [0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(r.order(3).len(), 3);
    }
}
