//! Codecs: values turned into payloads and back, for typed queues and
//! typed handlers.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{BoxError, Error, Result};

/// Turns values into payloads and back.
pub trait Codec<T>: Send + Sync + 'static {
    /// Encodes `value`; a value that cannot be encoded is
    /// [`Error::InvalidInput`].
    fn encode(&self, value: &T) -> Result<Bytes>;

    /// Decodes a payload.
    fn decode(&self, payload: &[u8]) -> std::result::Result<T, BoxError>;
}

/// The default codec: JSON through `serde_json`.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsonCodec;

impl<T: Serialize + DeserializeOwned> Codec<T> for JsonCodec {
    fn encode(&self, value: &T) -> Result<Bytes> {
        serde_json::to_vec(value)
            .map(Bytes::from)
            .map_err(|e| Error::invalid(format!("value does not encode as JSON: {e}")))
    }

    fn decode(&self, payload: &[u8]) -> std::result::Result<T, BoxError> {
        Ok(serde_json::from_slice(payload)?)
    }
}
