//! How a sharded queue's ids and dedup keys map to shards.

use crate::{Error, ItemId, Result};

/// The sharded id of shard `shard`'s item `id` in a queue of `shards`
/// shards: `id * shards + shard`. Every u64 splits back into exactly one
/// (shard, id) pair, so any id a caller hands in routes somewhere.
///
/// ```
/// use leaseq_core::ItemId;
/// use leaseq_core::layer::shard::{sharded_id, split_id};
/// let id = sharded_id(4, 3, ItemId::new(42))?;
/// assert_eq!(id.get(), 42 * 4 + 3);
/// assert_eq!(split_id(4, id), (3, ItemId::new(42)));
/// # Ok::<(), leaseq_core::Error>(())
/// ```
pub fn sharded_id(shards: u16, shard: u16, id: ItemId) -> Result<ItemId> {
    let k = u64::from(shards.max(1));
    id.get()
        .checked_mul(k)
        .and_then(|x| x.checked_add(u64::from(shard)))
        .filter(|_| shard < shards)
        .map(ItemId::new)
        .ok_or_else(|| Error::Corrupt {
            what: format!("shard {shard} of {shards} handed out id {id}, too large to shard"),
        })
}

/// The shard and the shard's own id of a sharded id in a queue of `shards`
/// shards.
pub fn split_id(shards: u16, id: ItemId) -> (u16, ItemId) {
    let k = u64::from(shards.max(1));
    let shard = u16::try_from(id.get() % k).unwrap_or(0);
    (shard, ItemId::new(id.get() / k))
}

/// The shard a dedup key lives in, so one key is deduplicated as on one
/// queue. FNV-1a: the same in every process and version.
pub(super) fn dedup_shard(key: &str, shards: u16) -> u16 {
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    u16::try_from(h % u64::from(shards.max(1))).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_shard() {
        for (k, shard, id) in [(4u16, 0u16, 1u64), (4, 3, 42), (1024, 1023, (1 << 53) + 7)] {
            let g = sharded_id(k, shard, ItemId::new(id)).expect("fits");
            assert_eq!(split_id(k, g), (shard, ItemId::new(id)));
        }
        assert!(sharded_id(4, 1, ItemId::new(u64::MAX)).is_err());
        assert!(sharded_id(4, 4, ItemId::new(1)).is_err());
        // Any id splits into a shard and back.
        for raw in [0u64, 5, 1_099_511_811_131, u64::MAX] {
            let (shard, inner) = split_id(4, ItemId::new(raw));
            assert_eq!(sharded_id(4, shard, inner).expect("fits").get(), raw);
        }
    }

    #[test]
    fn dedup_routing_is_stable() {
        // FNV-1a of "a" is 0xaf63dc4c8601ec8c; routing must never change,
        // or a key would be deduplicated in two shards.
        assert_eq!(
            dedup_shard("a", 1024),
            (0xaf63_dc4c_8601_ec8c_u64 % 1024) as u16
        );
        assert_eq!(dedup_shard("", 7), (0xcbf2_9ce4_8422_2325_u64 % 7) as u16);
    }
}
