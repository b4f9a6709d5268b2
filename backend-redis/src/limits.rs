//! Global queue limits on Redis: stored in the queue's `{p:q}:limits` hash
//! ([`crate::KeyLayout::limits`]) and enforced by the claim script
//! (`scripts/limits.lua`, prepended to `scripts/claim.lua`), next to the
//! queue's indexes in the same slot, on the server's clock.

use std::time::Duration;

use bytes::Bytes;
use leaseq_core::{Error, QueueLimits, QueueName, Rate, Result};

use crate::scripts::arg;
use crate::{RedisBackend, ScriptClient};

impl<C: ScriptClient> RedisBackend<C> {
    /// [`leaseq_core::Throttles::set_queue_limits`]: one script.
    pub(crate) async fn write_limits(&self, queue: &QueueName, limits: QueueLimits) -> Result<()> {
        limits.check()?;
        let none = || Bytes::from_static(b"");
        let args = vec![
            limits.concurrency.map_or_else(none, arg),
            limits.rate.map_or_else(none, |r| arg(r.claims())),
            limits.rate.map_or_else(none, |r| arg(r.per_millis())),
        ];
        let key = self.keys(queue)?.limits();
        self.run_with_keys(&self.scripts.limits_set, queue, vec![key], args)
            .await?;
        Ok(())
    }

    /// [`leaseq_core::Throttles::queue_limits`]: one script.
    pub(crate) async fn read_limits(&self, queue: &QueueName) -> Result<QueueLimits> {
        let key = self.keys(queue)?.limits();
        let r = self
            .run_with_keys(&self.scripts.limits_get, queue, vec![key], Vec::new())
            .await?;
        let f = r.tuple(3)?;
        let small = |v: Option<u64>| -> Result<Option<u32>> {
            v.map(|n| {
                u32::try_from(n).map_err(|_| Error::Corrupt {
                    what: format!("queue limit {n} is out of range"),
                })
            })
            .transpose()
        };
        let concurrency = small(f[0].opt_uint()?)?;
        let rate = match (small(f[1].opt_uint()?)?, f[2].opt_uint()?) {
            (Some(n), Some(per)) => Some(Rate::new(n, Duration::from_millis(per))?),
            _ => None,
        };
        Ok(QueueLimits { concurrency, rate })
    }
}
