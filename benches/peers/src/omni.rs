//! omniqueue's Redis backend: streams (its default) and lists (its fallback
//! for servers older than 6.2).
//!
//! omniqueue has no batch send and no batch ack: a "batch" here is 100
//! `send_raw` calls in flight at once, and each consumer acks the deliveries
//! of one `receive_all(10, 5 ms)` concurrently. Each consumer is built on its
//! own (as omniqueue intends: `receive` takes `&mut self`), so each has its
//! own bb8 pool and its own background tasks (delayed-job mover and the
//! reaper that requeues messages not acked within `ack_deadline_ms`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use futures_util::future::join_all;
use omniqueue::backends::redis::RedisConnectionManager;
use omniqueue::backends::{RedisBackend, RedisConfig, RedisConsumer};
use omniqueue::Delivery;

use crate::common::{
    enqueue_batches, finish_drain, payload, DrainClock, ProbeReport, Rates, Settings, Tally,
};
use crate::raw::redis_connect;

/// Connections per omniqueue pool (each consumer and the producer has one).
const POOL: u16 = 4;
/// Ack deadline for the drain: nothing is requeued.
const LONG_DEADLINE_MS: i64 = 60_000;
/// Ack deadline of the recoveries in the probe.
const SHORT_DEADLINE_MS: i64 = 300;

#[derive(Debug, Clone)]
struct Keys {
    queue: String,
    streams: bool,
}

impl Keys {
    fn new(tag: &str, streams: bool) -> Self {
        let kind = if streams { "streams" } else { "lists" };
        Keys {
            queue: format!("peers:omni:{kind}:{tag}"),
            streams,
        }
    }

    fn all(&self) -> Vec<String> {
        vec![
            self.queue.clone(),
            format!("{}_processing", self.queue),
            format!("{}:delayed", self.queue),
            format!("{}:delayed_lock", self.queue),
        ]
    }

    fn config(&self, s: &Settings, consumer: &str, deadline_ms: i64) -> RedisConfig {
        RedisConfig {
            dsn: s.redis_url.clone(),
            max_connections: POOL,
            reinsert_on_nack: false,
            queue_key: self.queue.clone(),
            delayed_queue_key: format!("{}:delayed", self.queue),
            delayed_lock_key: format!("{}:delayed_lock", self.queue),
            consumer_group: "peers".into(),
            consumer_name: consumer.into(),
            payload_key: "payload".into(),
            ack_deadline_ms: deadline_ms,
            dlq_config: None,
            sentinel_config: None,
        }
    }

    /// Deletes the keys; for streams creates the consumer group.
    async fn reset(&self, s: &Settings) -> Result<()> {
        let mut conn = redis_connect(&s.redis_url, true).await?;
        let _: () = redis::cmd("DEL")
            .arg(self.all())
            .query_async(&mut conn)
            .await?;
        if self.streams {
            let _: () = redis::cmd("XGROUP")
                .arg("CREATE")
                .arg(&self.queue)
                .arg("peers")
                .arg("0")
                .arg("MKSTREAM")
                .query_async(&mut conn)
                .await?;
        }
        Ok(())
    }

    async fn consumer(
        &self,
        s: &Settings,
        name: &str,
        deadline_ms: i64,
    ) -> Result<RedisConsumer<RedisConnectionManager>> {
        Ok(RedisBackend::builder(self.config(s, name, deadline_ms))
            .use_redis_streams(self.streams)
            .build_consumer()
            .await?)
    }

    async fn enqueue(&self, s: &Settings, jobs: u64) -> Result<f64> {
        let producer = Arc::new(
            RedisBackend::builder(self.config(s, "producer", LONG_DEADLINE_MS))
                .use_redis_streams(self.streams)
                .build_producer()
                .await?,
        );
        enqueue_batches(jobs, s.batch, s.producers, move |ids| {
            let producer = producer.clone();
            async move {
                let sends = ids.into_iter().map(|id| {
                    let producer = producer.clone();
                    async move { producer.send_raw(&payload(id)).await }
                });
                for r in join_all(sends).await {
                    r?;
                }
                Ok(())
            }
        })
        .await
    }
}

async fn ack_all(deliveries: Vec<Delivery>) -> Result<()> {
    for r in join_all(deliveries.into_iter().map(Delivery::ack)).await {
        r.map_err(|(e, _)| anyhow!("ack: {e}"))?;
    }
    Ok(())
}

/// The drain workload.
pub async fn drain(streams: bool, s: &Settings) -> Result<Rates> {
    let keys = Keys::new("drain", streams);
    keys.reset(s).await?;
    let enqueue_secs = keys.enqueue(s, s.jobs).await?;
    let mut consumers = Vec::new();
    for i in 0..s.consumers {
        consumers.push(keys.consumer(s, &format!("c{i}"), LONG_DEADLINE_MS).await?);
    }
    let clock = DrainClock::start(s.jobs);
    let mut tasks = tokio::task::JoinSet::new();
    for mut consumer in consumers {
        let clock = clock.clone();
        tasks.spawn(async move {
            while !clock.done() {
                let got = consumer.receive_all(10, Duration::from_millis(5)).await?;
                if got.is_empty() {
                    continue;
                }
                let n = got.len() as u64;
                ack_all(got).await?;
                clock.add(n);
            }
            Ok(())
        });
    }
    let drain = finish_drain(&clock, tasks, s.timeout).await?;
    let mut conn = redis_connect(&s.redis_url, true).await?;
    let left: u64 = if streams {
        redis::cmd("XLEN")
            .arg(&keys.queue)
            .query_async(&mut conn)
            .await?
    } else {
        redis::cmd("LLEN")
            .arg(&keys.queue)
            .query_async(&mut conn)
            .await?
    };
    if left != 0 {
        bail!("{left} messages left after the drain");
    }
    Ok(Rates {
        enqueue: s.jobs as f64 / enqueue_secs,
        drain,
    })
}

/// Jobs the crashed consumers still hold (pending entries of the group, or
/// the processing list).
async fn held(keys: &Keys, s: &Settings) -> Result<u64> {
    let mut conn = redis_connect(&s.redis_url, true).await?;
    if keys.streams {
        // XPENDING key group → [count, first, last, consumers]
        let reply: redis::Value = redis::cmd("XPENDING")
            .arg(&keys.queue)
            .arg("peers")
            .query_async(&mut conn)
            .await?;
        match reply {
            redis::Value::Array(items) => match items.first() {
                Some(redis::Value::Int(n)) => Ok(u64::try_from(*n).unwrap_or(0)),
                other => bail!("XPENDING: unexpected count {other:?}"),
            },
            other => bail!("XPENDING: unexpected reply {other:?}"),
        }
    } else {
        Ok(redis::cmd("LLEN")
            .arg(format!("{}_processing", keys.queue))
            .query_async(&mut conn)
            .await?)
    }
}

/// The duplicate-requeue probe: consumers receive and drop their
/// deliveries unacked, then several consumers with a 300 ms ack deadline run
/// omniqueue's own reaper at once until nothing is held, then a drain counts
/// deliveries per job.
pub async fn probe(streams: bool, s: &Settings) -> Result<ProbeReport> {
    let keys = Keys::new("probe", streams);
    keys.reset(s).await?;
    keys.enqueue(s, s.probe_jobs).await?;

    let share = (s.probe_jobs * 4 / 5 / s.probe_crashers.max(1) as u64).max(1) as usize;
    let mut crashed = 0u64;
    for i in 0..s.probe_crashers {
        let mut c = keys
            .consumer(s, &format!("crash{i}"), LONG_DEADLINE_MS)
            .await?;
        let mut got = Vec::new();
        let mut empty = 0;
        while got.len() < share && empty < 3 {
            let batch = c
                .receive_all(share - got.len(), Duration::from_millis(20))
                .await?;
            if batch.is_empty() {
                empty += 1;
            }
            got.extend(batch);
        }
        crashed += got.len() as u64;
        // The crash: deliveries and consumer (with its background tasks)
        // dropped, nothing acked.
        drop(got);
        drop(c);
    }

    // Several recoveries at once: consumers whose reapers requeue messages
    // older than the short deadline.
    let mut recoverers = Vec::new();
    for i in 0..s.probe_recoveries {
        recoverers.push(
            keys.consumer(s, &format!("recover{i}"), SHORT_DEADLINE_MS)
                .await?,
        );
    }
    let started = std::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if held(&keys, s).await? == 0 || started.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    // Let a reaper that is mid-batch finish, then stop them all.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let still_held = held(&keys, s).await?;
    drop(recoverers);

    let tally = Tally::new(s.probe_jobs);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..s.consumers {
        let mut c = keys
            .consumer(s, &format!("drain{i}"), LONG_DEADLINE_MS)
            .await?;
        let tally = tally.clone();
        tasks.spawn(async move {
            let mut idle = 0;
            while idle < 10 {
                let got = c.receive_all(10, Duration::from_millis(50)).await?;
                if got.is_empty() {
                    idle += 1;
                    continue;
                }
                idle = 0;
                for d in &got {
                    tally.record(d.borrow_payload().unwrap_or_default());
                }
                ack_all(got).await?;
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("drainer task")??;
    }
    let mut report = tally.verdict(crashed, None);
    if still_held > 0 {
        report.recovered = Some(crashed.saturating_sub(still_held));
    }
    Ok(report)
}
