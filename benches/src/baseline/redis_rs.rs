//! Raw Redis on the `redis` crate: pipelined `LPUSH`, then pipelined `RPOP`.

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::{Error, Result};
use redis::aio::MultiplexedConnection;

use super::Baseline;

/// The same client crate the backend uses, doing the plain list commands.
#[derive(Clone)]
pub struct RedisRsRaw {
    conn: MultiplexedConnection,
    prefix: String,
}

impl std::fmt::Debug for RedisRsRaw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRsRaw")
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn err(what: &str) -> impl FnOnce(redis::RedisError) -> Error + '_ {
    move |e| Error::outcome_unknown(what.to_owned(), e)
}

impl RedisRsRaw {
    /// Connects one multiplexed connection to `url`, with `TCP_NODELAY` set
    /// as `nodelay` says; keys start with `prefix`.
    pub async fn connect(url: &str, prefix: &str, nodelay: bool) -> Result<Self> {
        let info = redis::IntoConnectionInfo::into_connection_info(url)
            .map_err(err("redis url"))?
            .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(nodelay));
        let client = redis::Client::open(info).map_err(err("redis url"))?;
        let conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(err("connecting"))?;
        Ok(RedisRsRaw {
            conn,
            prefix: prefix.to_owned(),
        })
    }

    fn key(&self, queue: &str) -> String {
        format!("{}:raw:{queue}", self.prefix)
    }
}

#[async_trait]
impl Baseline for RedisRsRaw {
    fn name(&self) -> &str {
        "redis-rs-raw"
    }

    fn describe(&self) -> &str {
        "redis crate, one multiplexed connection: pipelined LPUSH of each payload, then pipelined RPOP"
    }

    async fn push(&self, queue: &str, payloads: &[Bytes]) -> Result<()> {
        let key = self.key(queue);
        let mut pipe = redis::pipe();
        for p in payloads {
            pipe.lpush(&key, p.as_ref()).ignore();
        }
        let mut conn = self.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(err("LPUSH"))
    }

    async fn pop(&self, queue: &str, n: usize) -> Result<usize> {
        let key = self.key(queue);
        let mut pipe = redis::pipe();
        for _ in 0..n {
            pipe.rpop(&key, None);
        }
        let mut conn = self.conn.clone();
        let got: Vec<Option<Vec<u8>>> = pipe.query_async(&mut conn).await.map_err(err("RPOP"))?;
        Ok(got.iter().filter(|v| v.is_some()).count())
    }

    async fn clear(&self, queue: &str) -> Result<()> {
        let mut conn = self.conn.clone();
        redis::cmd("DEL")
            .arg(self.key(queue))
            .query_async::<()>(&mut conn)
            .await
            .map_err(err("DEL"))
    }
}
