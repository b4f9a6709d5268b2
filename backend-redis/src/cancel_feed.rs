//! The signals fed from a queue's streams: the workers' cancel signal and
//! the finished signal. A cancel request adds an entry to the queue's
//! `cancels` stream (`scripts/cancel.lua`), a kept ending one to its `ends`
//! stream (`keep_items` in `scripts/common.lua`); one task per queue, stream
//! and backend handle reads it with `XREAD BLOCK` and fires the queue's
//! [`Signal`] for every subscriber in the process. A stream, not the
//! wake-up list: every subscriber must hear every entry, and a list hands
//! each marker to one. The task ends once nobody subscribes.
//!
//! The task reads from the stream's start, so an entry made between the
//! subscription and its first read is not missed; entries older than the
//! subscription fire the signal once more, which only costs a look.

use std::sync::Arc;
use std::time::Duration;

use leaseq_core::backoff::Backoff;
use leaseq_core::signal::{Signal, SignalHub};
use leaseq_core::{QueueName, Result};

use crate::{RedisBackend, Reply, ScriptClient};

/// How long one read blocks: also how soon the task notices that nobody
/// subscribes any more.
const READ_WAIT: Duration = Duration::from_secs(1);

impl<C: ScriptClient> RedisBackend<C> {
    /// Subscribes to `queue`'s cancel requests, starting its feed if this
    /// handle has none.
    pub(crate) fn subscribe_cancels(&self, queue: &QueueName) -> Result<Signal> {
        let key = self.keys(queue)?.cancel_stream();
        Ok(self.subscribe_stream(&self.cancels, queue, key))
    }

    /// Subscribes to `queue`'s kept endings, starting its feed if this
    /// handle has none.
    pub(crate) fn subscribe_finishes(&self, queue: &QueueName) -> Result<Signal> {
        let key = self.keys(queue)?.ends_stream();
        Ok(self.subscribe_stream(&self.finishes, queue, key))
    }

    /// `queue`'s signal on `hub`, fed from the stream `key`.
    fn subscribe_stream(&self, hub: &Arc<SignalHub>, queue: &QueueName, key: String) -> Signal {
        let (signal, first) = hub.subscribe_first(queue.as_str());
        if first {
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let client = Arc::clone(&self.client);
                runtime.spawn(feed(
                    client,
                    Arc::clone(hub),
                    queue.as_str().to_owned(),
                    key,
                ));
            }
        }
        signal
    }
}

/// Reads `key` and fires `queue`'s signal on `hub` until nobody subscribes.
async fn feed<C: ScriptClient>(client: Arc<C>, hub: Arc<SignalHub>, queue: String, key: String) {
    let mut after = "0-0".to_owned();
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    while !hub.unwatched(&queue) {
        match client.wait_stream(&key, &after, READ_WAIT).await {
            Ok(Reply::Nil) => {}
            Ok(reply) => match last_entry(&reply) {
                Some(id) => {
                    after = id;
                    hub.fire(&queue);
                }
                None => tracing::debug!(
                    queue,
                    ?reply,
                    "leaseq-redis: unreadable signal stream reply"
                ),
            },
            Err(e) => {
                // Entries may have been missed: the subscribers look for
                // themselves, then the read is tried again.
                tracing::debug!(queue, key, error = %e, "leaseq-redis: reading a signal stream failed");
                hub.fire(&queue);
                tokio::time::sleep(backoff.next_wait()).await;
                continue;
            }
        }
        backoff.reset();
    }
}

/// The id of the last entry in an `XREAD` reply for one stream.
fn last_entry(reply: &Reply) -> Option<String> {
    stream_entries(reply)?
        .last()
        .and_then(entry_parts)
        .map(|(id, _)| id)
}

/// The entries of an `XREAD` reply for one stream:
/// `[[key, [[id, [field, value, ...]], ...]]]`.
pub(crate) fn stream_entries(reply: &Reply) -> Option<&[Reply]> {
    let Reply::Array(streams) = reply else {
        return None;
    };
    let Some(Reply::Array(stream)) = streams.first() else {
        return None;
    };
    match stream.get(1) {
        Some(Reply::Array(entries)) => Some(entries),
        _ => None,
    }
}

/// One stream entry's id and its fields and values, `[id, [field, value,
/// ...]]`.
pub(crate) fn entry_parts(entry: &Reply) -> Option<(String, &[Reply])> {
    let Reply::Array(entry) = entry else {
        return None;
    };
    let (Some(Reply::Data(id)), Some(Reply::Array(fields))) = (entry.first(), entry.get(1)) else {
        return None;
    };
    Some((String::from_utf8(id.to_vec()).ok()?, fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn data(s: &str) -> Reply {
        Reply::Data(Bytes::from(s.to_owned()))
    }

    #[test]
    fn the_last_entry_of_a_read_is_found() {
        let entry =
            |id: &str| Reply::Array(vec![data(id), Reply::Array(vec![data("id"), data("7")])]);
        let reply = Reply::Array(vec![Reply::Array(vec![
            data("{p:q}:cancels"),
            Reply::Array(vec![entry("1-0"), entry("2-5")]),
        ])]);
        assert_eq!(last_entry(&reply).as_deref(), Some("2-5"));
        assert_eq!(last_entry(&Reply::Array(vec![])), None);
        assert_eq!(last_entry(&data("x")), None);
    }
}
