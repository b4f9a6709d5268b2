//! Where a queue's job events go: the sending half of the memory backend's
//! Events group, held in each queue's state.

use std::sync::Arc;

use leaseq_core::events::{EventHub, EventKind, JobEvent};
use leaseq_core::{ItemId, QueueName};

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
