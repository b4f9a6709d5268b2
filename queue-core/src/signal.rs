//! Signals: "something may have happened on this queue" from a backend to
//! the tasks that wait for it, without polling. A [`Signal`] is a hint,
//! like [`Backend::wait_for_work`](crate::Backend::wait_for_work): the
//! waiter reads the store again to learn what happened.
//!
//! A backend keeps one [`SignalHub`] per kind of signal and fires it from
//! wherever it learns of the event: the call itself in one process, or the
//! server's channel (PostgreSQL `NOTIFY`, a Redis stream) across processes.
//!
//! ```
//! use leaseq_core::signal::SignalHub;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let hub = SignalHub::default();
//! let mut signal = hub.subscribe("emails");
//! hub.fire("emails"); // fired before the wait: the wait still sees it
//! signal.changed().await;
//! # }
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};

use futures_util::future::select_all;
use tokio::sync::watch;

/// A subscription to one queue's signal (or several queues', merged). It
/// remembers what it has seen, so a signal fired between two waits is not
/// lost.
#[derive(Debug, Default)]
pub struct Signal {
    receivers: Vec<watch::Receiver<u64>>,
}

impl Signal {
    /// A signal that never fires: for a backend with no channel for the
    /// event, whose waiters fall back to their own poll.
    pub fn never() -> Self {
        Signal::default()
    }

    /// One signal that fires when any of `signals` fires: for a layer that
    /// spreads a queue over several stores.
    pub fn merge(signals: impl IntoIterator<Item = Signal>) -> Self {
        Signal {
            receivers: signals.into_iter().flat_map(|s| s.receivers).collect(),
        }
    }

    /// Waits until the signal fires after the last `changed` returned (or
    /// after the subscription, the first time). Pends forever on a signal
    /// that cannot fire any more (its hub is gone, or [`Signal::never`]).
    pub async fn changed(&mut self) {
        loop {
            if self.receivers.is_empty() {
                return std::future::pending().await;
            }
            let waits = self
                .receivers
                .iter_mut()
                .map(|rx| Box::pin(rx.changed()) as Pin<Box<dyn Future<Output = _> + Send + '_>>);
            let (res, at, _) = select_all(waits).await;
            match res {
                Ok(()) => {
                    self.receivers[at].borrow_and_update();
                    return;
                }
                // The hub is gone: this receiver can never fire again.
                Err(_) => {
                    self.receivers.swap_remove(at);
                }
            }
        }
    }
}

/// The senders of one kind of signal, by queue (or any other key). A key
/// nobody subscribes to costs nothing: firing it does nothing, and its
/// entry goes at the next subscription.
#[derive(Debug, Default)]
pub struct SignalHub {
    keys: Mutex<HashMap<String, watch::Sender<u64>>>,
}

impl SignalHub {
    fn keys(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        self.keys.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes to `key`'s signal.
    pub fn subscribe(&self, key: &str) -> Signal {
        self.subscribe_first(key).0
    }

    /// Subscribes to `key`'s signal; true when nobody else watched `key`,
    /// so a backend that feeds the hub from a server starts its feed.
    pub fn subscribe_first(&self, key: &str) -> (Signal, bool) {
        let mut keys = self.keys();
        if let Some(tx) = keys.get(key).filter(|tx| tx.receiver_count() > 0) {
            let rx = tx.subscribe();
            return (
                Signal {
                    receivers: vec![rx],
                },
                false,
            );
        }
        keys.retain(|_, tx| tx.receiver_count() > 0);
        let (tx, rx) = watch::channel(0);
        keys.insert(key.to_owned(), tx);
        (
            Signal {
                receivers: vec![rx],
            },
            true,
        )
    }

    /// Fires `key`'s signal for every subscriber.
    pub fn fire(&self, key: &str) {
        if let Some(tx) = self.keys().get(key) {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Fires every key's signal: after a feed that may have missed events
    /// (a lost connection) the waiters look for themselves.
    pub fn fire_all(&self) {
        for tx in self.keys().values() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// True while someone subscribes to `key`.
    pub fn watched(&self, key: &str) -> bool {
        self.keys()
            .get(key)
            .is_some_and(|tx| tx.receiver_count() > 0)
    }

    /// Forgets `key` if nobody subscribes to it any more, in one step with
    /// the check, so a subscription racing the feed's end starts a new feed
    /// (see [`SignalHub::subscribe_first`]). True when it was forgotten.
    pub fn unwatched(&self, key: &str) -> bool {
        let mut keys = self.keys();
        match keys.get(key) {
            Some(tx) if tx.receiver_count() > 0 => false,
            _ => {
                keys.remove(key);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::time::timeout;

    const SHORT: Duration = Duration::from_millis(50);

    #[tokio::test]
    async fn a_fire_between_waits_is_seen_once() {
        let hub = SignalHub::default();
        let mut s = hub.subscribe("q");
        hub.fire("q");
        hub.fire("q");
        assert!(timeout(SHORT, s.changed()).await.is_ok());
        // Both fires were seen by the one wait.
        assert!(timeout(SHORT, s.changed()).await.is_err());
    }

    #[tokio::test]
    async fn other_keys_do_not_fire() {
        let hub = SignalHub::default();
        let mut s = hub.subscribe("q");
        hub.fire("other");
        assert!(timeout(SHORT, s.changed()).await.is_err());
        hub.fire_all();
        assert!(timeout(SHORT, s.changed()).await.is_ok());
    }

    #[tokio::test]
    async fn merged_fires_on_any() {
        let (a, b) = (SignalHub::default(), SignalHub::default());
        let mut s = Signal::merge([a.subscribe("q"), b.subscribe("q")]);
        b.fire("q");
        assert!(timeout(SHORT, s.changed()).await.is_ok());
        drop(a);
        assert!(timeout(SHORT, s.changed()).await.is_err());
        b.fire("q");
        assert!(timeout(SHORT, s.changed()).await.is_ok());
    }

    #[tokio::test]
    async fn never_and_orphaned_signals_pend() {
        assert!(timeout(SHORT, Signal::never().changed()).await.is_err());
        let hub = SignalHub::default();
        let mut s = hub.subscribe("q");
        drop(hub);
        assert!(timeout(SHORT, s.changed()).await.is_err());
    }

    #[test]
    fn the_first_subscriber_is_told_and_unwatched_keys_go() {
        let hub = SignalHub::default();
        let (s, first) = hub.subscribe_first("q");
        assert!(first);
        let (s2, first) = hub.subscribe_first("q");
        assert!(!first);
        assert!(!hub.unwatched("q"));
        drop((s, s2));
        assert!(!hub.watched("q"));
        assert!(hub.unwatched("q"));
        assert!(hub.subscribe_first("q").1);
    }
}
