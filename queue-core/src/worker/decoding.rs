//! The adapter that runs a typed handler on raw payloads.

use std::marker::PhantomData;

use async_trait::async_trait;
use bytes::Bytes;

use super::{Handler, Job, JobContext, Permanent};
use crate::codec::Codec;
use crate::BoxError;

/// Decodes payloads for a typed handler; a payload that does not decode is a
/// [`Permanent`] error, so the item goes Dead at once instead of looping.
pub(crate) struct Decoding<T, C, H> {
    codec: C,
    inner: H,
    _t: PhantomData<fn() -> T>,
}

impl<T, C, H> Decoding<T, C, H> {
    pub(crate) fn new(codec: C, inner: H) -> Self {
        Decoding {
            codec,
            inner,
            _t: PhantomData,
        }
    }
}

#[async_trait]
impl<T, C, H> Handler<Bytes> for Decoding<T, C, H>
where
    T: Send + 'static,
    C: Codec<T>,
    H: Handler<T>,
{
    async fn handle(&self, job: Job<Bytes>, ctx: JobContext) -> std::result::Result<(), BoxError> {
        let value = self.codec.decode(&job.payload).map_err(|e| {
            Permanent::boxed(format!(
                "payload does not decode as {}: {e}",
                std::any::type_name::<T>()
            ))
        })?;
        self.inner.handle(job.with_payload(value), ctx).await
    }
}
