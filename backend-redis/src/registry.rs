//! [`WorkerRegistry`] on Redis: one registry per prefix, two keys in the
//! slot of the `_` pseudo queue (beside the registry of queues), so each
//! call is one script on one node, also on Redis Cluster:
//!
//! | key | type | holds |
//! |-----|------|-------|
//! | `{p:_}:workers` | hash | worker id → its entry ([`WorkerEntry::encode`]) |
//! | `{p:_}:workers:expiry` | sorted set | worker id → when its entry expires (ms, the server's clock) |
//!
//! Every call first deletes (a bounded batch of) the entries that expired,
//! so the cost of each grows with the number of workers registered, never
//! with jobs or items (`scripts/workers.lua`).

use std::time::Duration;

use async_trait::async_trait;
use leaseq_core::limits::millis_ceil;
use leaseq_core::{Error, Result, Timestamp, WorkerEntry, WorkerRegistry};

use crate::scripts::arg;
use crate::{KeyLayout, RedisBackend, Reply, ScriptClient};

impl<C: ScriptClient> RedisBackend<C> {
    /// The keys of the registry of live workers: the entries (a hash) and
    /// their expiries (a sorted set), under this backend's prefix.
    pub fn worker_registry_keys(&self) -> Result<[String; 2]> {
        Ok(registry_keys(&self.keys(&Self::registry_queue()?)?))
    }

    async fn on_workers(&self, args: Vec<bytes::Bytes>) -> Result<Reply> {
        let keys = self.worker_registry_keys()?.to_vec();
        self.run_with_keys(&self.scripts.workers, &Self::registry_queue()?, keys, args)
            .await
    }
}

/// The registry's keys under the hash tag of `layout` (the `_` pseudo
/// queue's): one slot.
fn registry_keys(layout: &KeyLayout) -> [String; 2] {
    let tag = layout.tag();
    [format!("{tag}:workers"), format!("{tag}:workers:expiry")]
}

#[async_trait]
impl<C: ScriptClient> WorkerRegistry for RedisBackend<C> {
    async fn register(&self, entry: &WorkerEntry, ttl: Duration) -> Result<Timestamp> {
        WorkerEntry::check_ttl(ttl)?;
        let text = entry.encode()?;
        let args = vec![
            arg("register"),
            arg(&entry.id),
            arg(millis_ceil(ttl)),
            bytes::Bytes::from(text),
        ];
        Ok(Timestamp::from_millis(self.on_workers(args).await?.uint()?))
    }

    async fn deregister(&self, id: &str) -> Result<bool> {
        let r = self.on_workers(vec![arg("deregister"), arg(id)]).await?;
        Ok(r.int()? == 1)
    }

    async fn workers(&self) -> Result<Vec<WorkerEntry>> {
        let r = self.on_workers(vec![arg("list")]).await?;
        let f = r.tuple(3)?;
        let (ids, expiries, entries) = (f[0].array()?, f[1].array()?, f[2].array()?);
        if expiries.len() != ids.len() || entries.len() != ids.len() {
            return Err(Error::Corrupt {
                what: format!("the registry of workers answered {r:?}"),
            });
        }
        let mut out = Vec::with_capacity(ids.len());
        for ((id, expires), entry) in ids.iter().zip(expiries).zip(entries) {
            let expires_at = Timestamp::from_millis(expires.uint()?);
            // An expiry without an entry (deleted under it) is no worker.
            let Reply::Data(text) = entry else { continue };
            let id = match id {
                Reply::Data(id) => String::from_utf8_lossy(id).into_owned(),
                other => format!("{other:?}"),
            };
            out.extend(WorkerEntry::decode_listed(&id, text, expires_at));
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::key_slot;

    #[test]
    fn the_registry_keys_share_one_slot() {
        let layout =
            KeyLayout::new("p", &leaseq_core::QueueName::new("_").expect("name")).expect("layout");
        let keys = registry_keys(&layout);
        assert_eq!(keys[0], "{p:_}:workers");
        for k in keys {
            assert_eq!(key_slot(k.as_bytes()), layout.slot(), "{k}");
        }
    }
}
