//! A compact set of item ids: a sparse bitmap of 4,096-id chunks, so a
//! ledger that remembers every id of a long soak stays a few bytes per
//! thousand items and does not mask the backend's own memory use.

use std::collections::BTreeMap;

use leaseq_core::ItemId;

const CHUNK_BITS: u64 = 4_096;
const WORDS: usize = (CHUNK_BITS / 64) as usize;

/// A set of ids.
#[derive(Debug, Clone, Default)]
pub struct IdSet {
    chunks: BTreeMap<u64, Box<[u64; WORDS]>>,
    len: usize,
}

impl IdSet {
    fn at(id: ItemId) -> (u64, usize, u64) {
        let raw = id.get();
        let within = raw % CHUNK_BITS;
        (
            raw / CHUNK_BITS,
            (within / 64) as usize,
            1u64 << (within % 64),
        )
    }

    /// Adds `id`; false when it was already there.
    pub fn insert(&mut self, id: ItemId) -> bool {
        let (chunk, word, bit) = Self::at(id);
        let words = self
            .chunks
            .entry(chunk)
            .or_insert_with(|| Box::new([0; WORDS]));
        let fresh = words[word] & bit == 0;
        words[word] |= bit;
        self.len += usize::from(fresh);
        fresh
    }

    /// True when `id` is in the set.
    pub fn contains(&self, id: ItemId) -> bool {
        let (chunk, word, bit) = Self::at(id);
        self.chunks.get(&chunk).is_some_and(|w| w[word] & bit != 0)
    }

    /// How many ids.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ids in order.
    pub fn iter(&self) -> impl Iterator<Item = ItemId> + '_ {
        self.chunks.iter().flat_map(|(chunk, words)| {
            words.iter().enumerate().flat_map(move |(w, bits)| {
                (0..64u64)
                    .filter(move |b| bits & (1 << b) != 0)
                    .map(move |b| ItemId::new(chunk * CHUNK_BITS + w as u64 * 64 + b))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_sparse_and_dense_ids() {
        let mut s = IdSet::default();
        for raw in [1, 2, 4_095, 4_096, u64::MAX, 1 << 40] {
            assert!(s.insert(ItemId::new(raw)));
        }
        assert!(!s.insert(ItemId::new(2)));
        assert!(s.contains(ItemId::new(4_096)) && !s.contains(ItemId::new(3)));
        assert_eq!(s.len(), 6);
        let ids: Vec<u64> = s.iter().map(|i| i.get()).collect();
        assert_eq!(ids, vec![1, 2, 4_095, 4_096, 1 << 40, u64::MAX]);
    }
}
