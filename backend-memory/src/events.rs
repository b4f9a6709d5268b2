//! The Events group on the memory backend: each queue's state holds an
//! [`Emitter`](crate::emitter::Emitter) on the backend's hub, so an event is
//! sent in the same critical section as the change it reports, in the order
//! of the changes.

use leaseq_core::events::EventStream;
use leaseq_core::{async_trait, Events, QueueName, Result};

use crate::backend::MemoryBackend;

/// In-process: a handle and its clones share one hub.
#[async_trait]
impl Events for MemoryBackend {
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream> {
        Ok(self.shared.events.subscribe(queue.as_str()).0)
    }
}
