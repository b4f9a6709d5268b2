//! Values as a store keeps them (signed 64-bit numbers, state names) and
//! back: one decoding for every backend that keeps items as rows, so a
//! value no call can write is [`Error::Corrupt`] the same way everywhere.

use std::time::Duration;

use crate::{Error, ItemId, ItemState, Result, Timestamp};

/// A stored id as an [`ItemId`]; ids are never negative.
pub fn item_id(raw: i64) -> Result<ItemId> {
    u64::try_from(raw)
        .map(ItemId::new)
        .map_err(|_| Error::Corrupt {
            what: format!("negative item id {raw}"),
        })
}

/// An id as a store of signed ids keeps it; an id over `i64::MAX` is
/// [`Error::InvalidInput`] (no such store can have handed it out).
pub fn signed_id(id: ItemId) -> Result<i64> {
    i64::try_from(id.get()).map_err(|_| Error::invalid(format!("item id {id} is out of range")))
}

/// A stored counter (attempts, max attempts) as `u32`.
pub fn count(raw: i64, what: &str) -> Result<u32> {
    u32::try_from(raw).map_err(|_| Error::Corrupt {
        what: format!("{what} out of range: {raw}"),
    })
}

/// Epoch milliseconds as a [`Timestamp`], clamped at the epoch.
pub fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A stored state name.
pub fn state(raw: &str) -> Result<ItemState> {
    raw.parse().map_err(|_| Error::Corrupt {
        what: format!("unknown state {raw:?}"),
    })
}

/// A duration in whole milliseconds, a part millisecond rounded up (so a
/// delay or a hold never ends early), clamped to `i64::MAX`.
pub fn millis(d: Duration) -> i64 {
    i64::try_from(crate::limits::millis_ceil(d)).unwrap_or(i64::MAX)
}

/// A count bound (a `LIMIT`), clamped to `i64::MAX`.
pub fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_no_call_writes_are_corrupt() {
        assert!(matches!(item_id(-1), Err(Error::Corrupt { .. })));
        assert!(matches!(count(-3, "attempts"), Err(Error::Corrupt { .. })));
        assert!(matches!(
            count(i64::from(u32::MAX) + 1, "attempts"),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(state("gone"), Err(Error::Corrupt { .. })));
        assert!(matches!(
            signed_id(ItemId::new(u64::MAX)),
            Err(Error::InvalidInput { .. })
        ));
        assert_eq!(item_id(7).expect("id"), ItemId::new(7));
        assert_eq!(state("Dead").expect("state"), ItemState::Dead);
        assert_eq!(timestamp(-5), Timestamp::from_millis(0));
        assert_eq!(millis(Duration::from_micros(1_500)), 2);
        assert_eq!(millis(Duration::MAX), i64::MAX);
        assert_eq!(limit(usize::MAX), i64::MAX);
    }
}
