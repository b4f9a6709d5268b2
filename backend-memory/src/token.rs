//! Fresh lease tokens: 128 bits from the operating system's random source,
//! drawn in bulk so a claim of many items does not make one system call per
//! item.

use std::cell::RefCell;

use leaseq_core::LeaseToken;

/// Tokens drawn per refill.
const POOL: usize = 64;

struct Pool {
    bytes: [u8; POOL * 16],
    next: usize,
}

thread_local! {
    static TOKENS: RefCell<Pool> = const { RefCell::new(Pool { bytes: [0; POOL * 16], next: POOL }) };
}

/// A fresh random token. Each is handed out once: the pool is overwritten
/// by the next refill before its bytes are used again.
pub(crate) fn fresh() -> LeaseToken {
    TOKENS
        .try_with(|cell| {
            let mut pool = cell.try_borrow_mut().ok()?;
            if pool.next == POOL {
                getrandom::fill(&mut pool.bytes).ok()?;
                pool.next = 0;
            }
            let start = pool.next * 16;
            let mut raw = [0u8; 16];
            raw.copy_from_slice(&pool.bytes[start..start + 16]);
            pool.next += 1;
            Some(LeaseToken::from_u128(u128::from_le_bytes(raw)))
        })
        .ok()
        .flatten()
        .unwrap_or_else(LeaseToken::random)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    #[test]
    fn tokens_are_distinct_across_refills() {
        let tokens: HashSet<_> = (0..super::POOL * 5).map(|_| super::fresh()).collect();
        assert_eq!(tokens.len(), super::POOL * 5);
    }
}
