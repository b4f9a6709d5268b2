//! Typed jobs: payloads encoded from and decoded into a Rust type by a
//! replaceable [`Codec`] (JSON by default).

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{Codec, JsonCodec};
use crate::{Backend, Enqueued, Error, ItemId, NewItem, QueueName, Result};

/// A queue of `T` values: enqueues encode with the codec, each in a
/// producer span `enqueue` ([`crate::spans`]).
///
/// ```
/// # async fn example(backend: std::sync::Arc<dyn leaseq_core::Backend>) -> leaseq_core::Result<()> {
/// use leaseq_core::TypedQueue;
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Email { to: String }
/// let emails = TypedQueue::<Email>::new(backend, "emails")?;
/// emails.enqueue(&Email { to: "a@example.com".into() }).await?;
/// # Ok(()) }
/// ```
pub struct TypedQueue<T, C = JsonCodec> {
    backend: Arc<dyn Backend>,
    queue: QueueName,
    codec: C,
    _t: PhantomData<fn(&T)>,
}

impl<T, C: Clone> Clone for TypedQueue<T, C> {
    fn clone(&self) -> Self {
        TypedQueue {
            backend: Arc::clone(&self.backend),
            queue: self.queue.clone(),
            codec: self.codec.clone(),
            _t: PhantomData,
        }
    }
}

impl<T, C: fmt::Debug> fmt::Debug for TypedQueue<T, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedQueue")
            .field("queue", &self.queue)
            .field("codec", &self.codec)
            .field("type", &std::any::type_name::<T>())
            .finish()
    }
}

impl<T: Serialize + DeserializeOwned> TypedQueue<T, JsonCodec> {
    /// A JSON queue named `queue` on `backend`.
    pub fn new(backend: Arc<dyn Backend>, queue: impl AsRef<str>) -> Result<Self> {
        Self::with_codec(backend, queue, JsonCodec)
    }
}

impl<T, C: Codec<T>> TypedQueue<T, C> {
    /// A queue that encodes with `codec`.
    pub fn with_codec(backend: Arc<dyn Backend>, queue: impl AsRef<str>, codec: C) -> Result<Self> {
        Ok(TypedQueue {
            backend,
            queue: QueueName::new(queue)?,
            codec,
            _t: PhantomData,
        })
    }

    /// The queue's name.
    pub fn name(&self) -> &QueueName {
        &self.queue
    }

    /// Enqueues one value with default options; returns its id.
    pub async fn enqueue(&self, value: &T) -> Result<ItemId> {
        self.enqueue_with(value, |item| item).await
    }

    /// Enqueues one value, setting options on the item (priority, delay,
    /// attempts, dedup key) with `options`.
    pub async fn enqueue_with(
        &self,
        value: &T,
        options: impl FnOnce(NewItem) -> NewItem,
    ) -> Result<ItemId> {
        let item = options(NewItem::new(self.codec.encode(value)?));
        let out = crate::spans::enqueue(self.backend.as_ref(), &self.queue, vec![item]).await?;
        out.first().map(|e| e.id).ok_or_else(|| Error::Corrupt {
            what: "enqueue of one item returned no result".into(),
        })
    }

    /// Enqueues a batch of values with default options.
    pub async fn enqueue_batch(&self, values: &[T]) -> Result<Vec<Enqueued>> {
        let items = values
            .iter()
            .map(|v| self.codec.encode(v).map(NewItem::new))
            .collect::<Result<Vec<_>>>()?;
        crate::spans::enqueue(self.backend.as_ref(), &self.queue, items).await
    }
}
