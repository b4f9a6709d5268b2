//! The Events group on the memory backend: each queue's state holds an
//! [`Emitter`] on the backend's hub, so an event is sent in the same
//! critical section as the change it reports, in the order of the changes.

use std::sync::Arc;

use leaseq_core::events::{EventHub, EventKind, EventStream, JobEvent};
use leaseq_core::{async_trait, Events, ItemId, QueueName, Result};

use crate::backend::MemoryBackend;

/// Where one queue's events go: the backend's hub under the queue's name.
/// Set when the queue is made; the default (for tests of the state alone)
/// sends nothing.
#[derive(Debug, Default)]
pub(crate) struct Emitter {
    target: Option<(Arc<EventHub>, QueueName)>,
}

impl Emitter {
    pub(crate) fn new(hub: Arc<EventHub>, queue: QueueName) -> Self {
        Emitter {
            target: Some((hub, queue)),
        }
    }

    /// Sends item `id`'s event, built only when someone listens.
    pub(crate) fn emit(&self, id: u64, kind: impl FnOnce() -> EventKind) {
        if let Some((hub, queue)) = &self.target {
            hub.publish(queue.as_str(), || JobEvent::new(ItemId::new(id), kind()));
        }
    }
}

/// In-process: a handle and its clones share one hub.
#[async_trait]
impl Events for MemoryBackend {
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream> {
        Ok(self.shared.events.subscribe(queue.as_str()).0)
    }
}
