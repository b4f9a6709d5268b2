//! Names and identifiers: a validated queue name, item ids and lease tokens.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::{Error, Result};

/// A validated queue name.
///
/// 1 to [`QueueName::MAX_LEN`] bytes of ASCII letters, digits, `-`, `_`, `.`
/// and `:`. The set leaves out braces, spaces and quotes so a name is safe in
/// a Redis hash tag, a SQL literal and a shell alike. Cloning is cheap.
///
/// ```
/// use leaseq_core::QueueName;
/// assert!(QueueName::new("emails.high").is_ok());
/// assert!(QueueName::new("").is_err());
/// assert!(QueueName::new("a{b}").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueName(Arc<str>);

impl QueueName {
    /// The longest name accepted, in bytes.
    pub const MAX_LEN: usize = 128;

    /// Validates `name`; [`Error::InvalidInput`] says what is wrong with it.
    pub fn new(name: impl AsRef<str>) -> Result<Self> {
        let name = name.as_ref();
        if name.is_empty() {
            return Err(Error::invalid("queue name is empty"));
        }
        if name.len() > Self::MAX_LEN {
            return Err(Error::invalid(format!(
                "queue name is {} bytes, the limit is {}",
                name.len(),
                Self::MAX_LEN
            )));
        }
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
        {
            return Err(Error::invalid(format!(
                "queue name {name:?} contains {bad:?}; allowed are ASCII letters, digits, '-', '_', '.', ':'"
            )));
        }
        Ok(QueueName(Arc::from(name)))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for QueueName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for QueueName {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        QueueName::new(s)
    }
}

impl TryFrom<&str> for QueueName {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self> {
        QueueName::new(s)
    }
}

/// An item's id, unique within its queue and assigned by the backend.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ItemId(u64);

impl ItemId {
    /// Wraps a raw id. Backends call this; users get ids from `enqueue`.
    pub const fn new(raw: u64) -> Self {
        ItemId(raw)
    }

    /// The raw id.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for ItemId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        s.parse::<u64>()
            .map(ItemId)
            .map_err(|_| Error::invalid(format!("item id {s:?} is not an unsigned integer")))
    }
}

/// The fencing token of one lease: fresh and unique for every claim.
///
/// Only the holder of the item's current token may ack, extend, release or
/// fail it. Tokens are 128 random bits, so one cannot be guessed, and one
/// from another item or queue never matches.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseToken(u128);

impl LeaseToken {
    /// A fresh random token.
    pub fn random() -> Self {
        // The thread's generator is a CSPRNG seeded from the OS: tokens
        // cannot be guessed.
        LeaseToken(rand::random::<u128>())
    }

    /// Rebuilds a token from its raw bits (as stored by a backend).
    pub const fn from_u128(raw: u128) -> Self {
        LeaseToken(raw)
    }

    /// The raw bits, for storage.
    pub const fn as_u128(self) -> u128 {
        self.0
    }
}

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LeaseToken({:032x})", self.0)
    }
}

/// 32 lowercase hex digits, the form backends store.
impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // 32 lowercase hex digits, by table: backends send one per lease,
        // and `{:032x}` costs several times as much.
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, digit) in out.iter_mut().enumerate() {
            *digit = HEX[((self.0 >> (124 - 4 * i)) & 0xf) as usize];
        }
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

impl FromStr for LeaseToken {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if s.len() != 32 {
            return Err(Error::invalid("lease token must be 32 hex digits"));
        }
        u128::from_str_radix(s, 16)
            .map(LeaseToken)
            .map_err(|_| Error::invalid("lease token must be 32 hex digits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_name_rejects_empty_long_and_odd_characters() {
        assert!(matches!(
            QueueName::new(""),
            Err(Error::InvalidInput { .. })
        ));
        assert!(QueueName::new("a".repeat(QueueName::MAX_LEN)).is_ok());
        let long = "a".repeat(QueueName::MAX_LEN + 1);
        assert!(matches!(
            QueueName::new(long),
            Err(Error::InvalidInput { .. })
        ));
        for bad in ["a b", "a{b", "x}", "é", "a\0", "q'", "a/b", "\u{1F600}"] {
            assert!(QueueName::new(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            QueueName::new("jobs:high-1.x_y")
                .map(|q| q.to_string())
                .ok(),
            Some("jobs:high-1.x_y".into())
        );
    }

    #[test]
    fn token_round_trips_through_text() {
        let t = LeaseToken::random();
        let back: LeaseToken = t.to_string().parse().expect("parses");
        assert_eq!(t, back);
        assert_ne!(t, LeaseToken::random());
        assert!("xyz".parse::<LeaseToken>().is_err());
        assert!("g".repeat(32).parse::<LeaseToken>().is_err());
        let t = LeaseToken::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(t.to_string(), format!("{:032x}", t.as_u128()));
        assert_eq!(
            LeaseToken::from_u128(0xab).to_string(),
            format!("{:032x}", 0xab)
        );
    }

    #[test]
    fn item_id_parses_or_says_why_not() {
        assert_eq!("42".parse::<ItemId>().ok(), Some(ItemId::new(42)));
        assert!(matches!(
            "-1".parse::<ItemId>(),
            Err(Error::InvalidInput { .. })
        ));
    }
}
