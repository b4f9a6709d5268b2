//! A fast hasher for the backend's own `u64` item ids.
//!
//! Ids are assigned by the backend from a counter, never chosen by a user, so
//! a keyed hash (the standard SipHash) buys nothing here and costs time on
//! every operation. A multiply by the 64-bit golden ratio spreads sequential
//! ids over every bit the table looks at.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` keyed by item id.
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Hashes one `u64` by a multiply; other input falls back to FNV-1a.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0 ^ 0xcbf2_9ce4_8422_2325;
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(GOLDEN).rotate_left(26);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_and_round_trip() {
        let mut m: IdMap<u64> = IdMap::default();
        for i in 0..10_000u64 {
            m.insert(i, i * 2);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u64).all(|i| m.get(&i) == Some(&(i * 2))));
    }
}
