//! [`Events`] on Redis: how events travel and what may lose them is in the
//! crate docs, [Job events](crate#job-events). Here, a backend handle's
//! side: one [`EventHub`], and per queue with a subscriber one feed, a
//! task that renews the queue's gate ([`crate::KeyLayout::events_gate`])
//! every [`GATE_REFRESH`] and reads its stream
//! ([`crate::KeyLayout::events_stream`]) into the hub. The first
//! subscriber of a queue in the handle sets the gate and reads the
//! stream's last entry before `subscribe` returns; the feed reads on from
//! there, and stops when the last stream holding it is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::backoff::Backoff;
use leaseq_core::events::{EventHub, EventStream, JobEvent, GATE_REFRESH, GATE_TTL};
use leaseq_core::{Events, QueueName, Result};
use tokio::time::Instant;

use crate::cancel_feed::{entry_parts, stream_entries};
use crate::scripts::arg;
use crate::{RedisBackend, Reply, ScriptClient};

/// How long one read blocks: also the longest a renewal waits.
const READ_WAIT: Duration = Duration::from_secs(1);

// Two renewals may fail, each after a read, before the gate lapses.
const _: () = assert!(GATE_REFRESH.as_secs() * 2 + READ_WAIT.as_secs() < GATE_TTL.as_secs());

/// A backend handle's events: the hub its streams read, and the feed of
/// each queue with a subscriber.
#[derive(Debug, Default)]
pub(crate) struct EventFeeds {
    hub: Arc<EventHub>,
    feeds: Mutex<HashMap<String, Weak<Feed>>>,
}

impl EventFeeds {
    fn feeds(&self) -> MutexGuard<'_, HashMap<String, Weak<Feed>>> {
        self.feeds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `queue`'s feed while a stream holds it.
    fn live(&self, queue: &QueueName) -> Option<Arc<Feed>> {
        self.feeds().get(queue.as_str()).and_then(Weak::upgrade)
    }
}

/// One queue's feed task, stopped when the last stream holding it goes.
#[derive(Debug)]
struct Feed(tokio::task::AbortHandle);

impl Drop for Feed {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<C: ScriptClient> RedisBackend<C> {
    /// Sets `queue`'s gate for [`GATE_TTL`]; answers the id of the last
    /// entry of its events stream.
    async fn events_on(&self, queue: &QueueName) -> Result<String> {
        let ttl = arg(GATE_TTL.as_millis());
        self.run(&self.scripts.events_on, queue, vec![ttl])
            .await?
            .text()
    }
}

/// Follows every handle of the store, in every process: see the crate
/// docs, [Job events](crate#job-events).
#[async_trait]
impl<C: ScriptClient> Events for RedisBackend<C> {
    async fn subscribe(&self, queue: &QueueName) -> Result<EventStream> {
        let key = self.keys(queue)?.events_stream();
        let events = &self.events;
        if let Some(feed) = events.live(queue) {
            return Ok(events.hub.subscribe(queue.as_str()).0.with_feed(feed));
        }
        let after = self.events_on(queue).await?;
        let (stream, _) = events.hub.subscribe(queue.as_str());
        let mut feeds = events.feeds();
        // Another subscribe of this handle may have started one meanwhile.
        if let Some(feed) = feeds.get(queue.as_str()).and_then(Weak::upgrade) {
            return Ok(stream.with_feed(feed));
        }
        let task = tokio::spawn(feed(self.clone(), queue.clone(), key, after));
        let feed = Arc::new(Feed(task.abort_handle()));
        feeds.retain(|_, f| f.strong_count() > 0);
        feeds.insert(queue.as_str().to_owned(), Arc::downgrade(&feed));
        Ok(stream.with_feed(feed))
    }
}

/// Reads `queue`'s events stream `key` from the entry after `after` into
/// the hub, renewing the gate, until aborted.
async fn feed<C: ScriptClient>(
    backend: RedisBackend<C>,
    queue: QueueName,
    key: String,
    mut after: String,
) {
    let hub = Arc::clone(&backend.events.hub);
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    let mut renewed = Instant::now();
    loop {
        if renewed.elapsed() >= GATE_REFRESH {
            match backend.events_on(&queue).await {
                Ok(_) => renewed = Instant::now(),
                Err(e) => tracing::debug!(queue = %queue, error = %e,
                    "leaseq-redis: renewing the events gate failed"),
            }
        }
        match backend.client.wait_stream(&key, &after, READ_WAIT).await {
            Ok(Reply::Nil) => {}
            Ok(reply) => match stream_entries(&reply) {
                Some(entries) => {
                    for entry in entries {
                        if let Some(id) = publish(&hub, &queue, entry) {
                            after = id;
                        }
                    }
                }
                None => tracing::warn!(queue = %queue, ?reply,
                    "leaseq-redis: unreadable events stream reply"),
            },
            Err(e) => {
                tracing::debug!(queue = %queue, error = %e,
                    "leaseq-redis: reading the events stream failed");
                tokio::time::sleep(backoff.next_wait()).await;
                continue;
            }
        }
        backoff.reset();
    }
}

/// Publishes the events of one stream entry; answers its id. A value that
/// is not an event is logged and skipped.
fn publish(hub: &EventHub, queue: &QueueName, entry: &Reply) -> Option<String> {
    let Some((id, fields)) = entry_parts(entry) else {
        tracing::warn!(queue = %queue, ?entry, "leaseq-redis: unreadable events stream entry");
        return None;
    };
    for value in fields.iter().skip(1).step_by(2) {
        let event = match value {
            Reply::Data(text) => std::str::from_utf8(text)
                .map_err(|e| e.to_string())
                .and_then(|t| JobEvent::from_wire(t).map_err(|e| e.to_string())),
            other => Err(format!("not text: {other:?}")),
        };
        match event {
            Ok(event) => hub.publish(queue.as_str(), || event),
            Err(error) => {
                tracing::warn!(queue = %queue, entry = id, error,
                    "leaseq-redis: skipped an event that does not read")
            }
        }
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use leaseq_core::events::EventKind;
    use leaseq_core::ItemId;

    fn data(s: &str) -> Reply {
        Reply::Data(Bytes::from(s.to_owned()))
    }

    #[tokio::test]
    async fn an_entry_publishes_its_events_in_order_and_skips_what_does_not_read() {
        let hub = EventHub::default();
        let queue = QueueName::new("q").expect("name");
        let (mut stream, _) = hub.subscribe("q");
        let entry = Reply::Array(vec![
            data("5-1"),
            Reply::Array(vec![
                data("e"),
                data("enqueued 7"),
                data("e"),
                data("exploded 7"),
                data("e"),
                Reply::Data(Bytes::from_static(b"\xff")),
                data("e"),
                data("started 7 2"),
            ]),
        ]);
        assert_eq!(publish(&hub, &queue, &entry).as_deref(), Some("5-1"));
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(stream.next().await.and_then(|r| r.ok()));
        }
        let id = ItemId::new(7);
        assert_eq!(
            got,
            [
                Some(JobEvent::new(id, EventKind::Enqueued)),
                Some(JobEvent::new(id, EventKind::Started { attempt: 2 })),
            ]
        );
        assert_eq!(publish(&hub, &queue, &data("x")), None);
    }
}
