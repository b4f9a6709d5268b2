//! A client-neutral script reply and the decoding helpers the backend uses.

use bytes::Bytes;
use leaseq_core::{Error, Result};

/// A script reply, as either client adapter hands it over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A nil (Lua `false`).
    Nil,
    /// An integer (Lua numbers are truncated to integers).
    Int(i64),
    /// A bulk or status string.
    Data(Bytes),
    /// A nested array (a Lua table).
    Array(Vec<Reply>),
}

fn shape(what: &str, got: &Reply) -> Error {
    Error::Corrupt {
        what: format!("unexpected script reply: wanted {what}, got {got:?}"),
    }
}

impl Reply {
    pub(crate) fn int(&self) -> Result<i64> {
        match self {
            Reply::Int(n) => Ok(*n),
            Reply::Data(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| shape("an integer", self)),
            _ => Err(shape("an integer", self)),
        }
    }

    pub(crate) fn uint(&self) -> Result<u64> {
        u64::try_from(self.int()?).map_err(|_| shape("a non-negative integer", self))
    }

    pub(crate) fn bytes(&self) -> Result<Bytes> {
        match self {
            Reply::Data(b) => Ok(b.clone()),
            Reply::Int(n) => Ok(Bytes::from(n.to_string())),
            _ => Err(shape("a string", self)),
        }
    }

    pub(crate) fn text(&self) -> Result<String> {
        let b = self.bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| shape("UTF-8 text", self))
    }

    pub(crate) fn opt_text(&self) -> Result<Option<String>> {
        match self {
            Reply::Nil => Ok(None),
            _ => self.text().map(Some),
        }
    }

    pub(crate) fn opt_uint(&self) -> Result<Option<u64>> {
        match self {
            Reply::Nil => Ok(None),
            _ => self.uint().map(Some),
        }
    }

    pub(crate) fn array(&self) -> Result<&[Reply]> {
        match self {
            Reply::Array(a) => Ok(a),
            // An empty Lua table arrives as an empty array; some clients map
            // a nil array to Nil.
            Reply::Nil => Ok(&[]),
            _ => Err(shape("an array", self)),
        }
    }

    /// The array, which must have exactly `n` elements.
    pub(crate) fn tuple(&self, n: usize) -> Result<&[Reply]> {
        let a = self.array()?;
        if a.len() != n {
            return Err(shape(&format!("an array of {n}"), self));
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_is_typed_and_never_panics() {
        assert_eq!(Reply::Int(5).uint().ok(), Some(5));
        assert!(Reply::Int(-1).uint().is_err());
        assert_eq!(Reply::Data(Bytes::from("12")).int().ok(), Some(12));
        assert!(Reply::Data(Bytes::from("x")).int().is_err());
        assert!(Reply::Int(1).array().is_err());
        assert_eq!(Reply::Nil.array().map(|a| a.len()).ok(), Some(0));
        assert_eq!(Reply::Nil.opt_text().ok(), Some(None));
        assert!(Reply::Array(vec![Reply::Nil]).tuple(2).is_err());
        assert!(matches!(Reply::Nil.int(), Err(Error::Corrupt { .. })));
    }
}
