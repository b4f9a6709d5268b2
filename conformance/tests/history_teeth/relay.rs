//! Event streams a faulty wrapper hands out in place of the backend's: a
//! task reads the backend's stream and republishes what a `shape` makes
//! of each event, so an event can be dropped, repeated, or held far past
//! the contract's bound.

use std::sync::Arc;

use leaseq_core::events::{EventHub, EventStream, JobEvent, EVENT_BUFFER};

/// The hub key each relay publishes under (one hub per source).
const KEY: &str = "relay";

/// Stops the relaying task when the last stream that needs it is dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A stream of what `shape` makes of each event of `inner`, over
/// `sources` channels of [`EVENT_BUFFER`] each, filled one after another
/// (half full each): with one source it lags as the backend's does; with
/// many it holds that many times the bound without a lag. Order holds
/// within each source. Ends quietly where `inner` lags or ends.
pub(crate) fn relay(
    mut inner: EventStream,
    sources: usize,
    shape: impl Fn(JobEvent) -> Vec<JobEvent> + Send + 'static,
) -> EventStream {
    let hubs: Vec<EventHub> = (0..sources.max(1)).map(|_| EventHub::default()).collect();
    let streams: Vec<EventStream> = hubs.iter().map(|hub| hub.subscribe(KEY).0).collect();
    let fill = EVENT_BUFFER / 2;
    let task = tokio::spawn(async move {
        let mut sent = 0usize;
        while let Some(Ok(event)) = inner.next().await {
            for out in shape(event) {
                let at = (sent / fill).min(hubs.len() - 1);
                hubs[at].publish(KEY, || out);
                sent += 1;
            }
        }
    });
    EventStream::merge(streams).with_feed(Arc::new(AbortOnDrop(task)))
}
