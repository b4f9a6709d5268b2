//! The faulty wrapper's Events group: the backend's stream, or one with
//! the seeded fault.

use async_trait::async_trait;
use leaseq_core::events::{EventKind, EventStream, JobEvent};
use leaseq_core::{BackendExt, Events, ItemId, QueueName, Result};

use super::faulty::{Fault, Faulty};
use super::relay::relay;

/// Sources of a stream that never lags in the checks: 64 half-filled
/// buffers hold 32 times [`leaseq_core::events::EVENT_BUFFER`].
const UNBOUNDED_SOURCES: usize = 64;

#[async_trait]
impl Events for Faulty {
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream> {
        let stream = self.inner.events()?.subscribe(queue).await?;
        Ok(match self.fault {
            Fault::EventsSilent => EventStream::empty(),
            Fault::EventsOffByOne => stream.map_ids(|id| Some(ItemId::new(id.get() + 1))),
            Fault::EventsDropReleased => relay(stream, 1, |e: JobEvent| {
                if e.kind == EventKind::Released {
                    vec![]
                } else {
                    vec![e]
                }
            }),
            Fault::EventsDuplicated => relay(stream, 1, |e: JobEvent| vec![e.clone(), e]),
            Fault::EventsUnbounded => relay(stream, UNBOUNDED_SOURCES, |e| vec![e]),
            Fault::EventsForDedup | Fault::EventsForAdmin => {
                EventStream::merge([stream, self.hub.subscribe(queue.as_str()).0])
            }
            _ => stream,
        })
    }
}
