//! A `VecDeque` behind a mutex: the floor for an in-process queue.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::{Error, Result};

use super::Baseline;

/// One `VecDeque` per queue name, each call one critical section.
#[derive(Debug, Default)]
pub struct VecDequeBaseline {
    queues: Mutex<HashMap<String, VecDeque<Bytes>>>,
}

impl VecDequeBaseline {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, VecDeque<Bytes>>) -> T) -> Result<T> {
        let mut guard = self.queues.lock().map_err(|_| Error::Corrupt {
            what: "baseline mutex poisoned".into(),
        })?;
        Ok(f(&mut guard))
    }
}

#[async_trait]
impl Baseline for VecDequeBaseline {
    fn name(&self) -> &str {
        "memory-raw"
    }

    fn describe(&self) -> &str {
        "VecDeque<Bytes> behind a std Mutex: push_back / pop_front"
    }

    async fn push(&self, queue: &str, payloads: &[Bytes]) -> Result<()> {
        self.with(|m| {
            let q = match m.get_mut(queue) {
                Some(q) => q,
                None => m.entry(queue.to_owned()).or_default(),
            };
            q.extend(payloads.iter().cloned());
        })
    }

    async fn pop(&self, queue: &str, n: usize) -> Result<usize> {
        self.with(|m| {
            let Some(q) = m.get_mut(queue) else { return 0 };
            let k = n.min(q.len());
            q.drain(..k).count()
        })
    }

    async fn clear(&self, queue: &str) -> Result<()> {
        self.with(|m| {
            m.remove(queue);
        })
    }
}
