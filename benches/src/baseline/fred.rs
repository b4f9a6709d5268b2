//! Raw Redis on the `fred` crate: pipelined `LPUSH`, then pipelined `RPOP`.

use async_trait::async_trait;
use bytes::Bytes;
use fred::prelude::{Builder, ClientLike, Config, KeysInterface, ListInterface, Value};
use leaseq_core::{Error, Result};

use super::Baseline;

/// The same client crate the backend uses, doing the plain list commands.
pub struct FredRaw {
    client: fred::clients::Client,
    prefix: String,
}

impl std::fmt::Debug for FredRaw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FredRaw")
            .field("prefix", &self.prefix)
            .finish()
    }
}

fn err(what: &str) -> impl FnOnce(fred::error::Error) -> Error + '_ {
    move |e| Error::outcome_unknown(what.to_owned(), e)
}

impl FredRaw {
    /// Connects one client to `url`, with `TCP_NODELAY` set as `nodelay`
    /// says; keys start with `prefix`.
    pub async fn connect(url: &str, prefix: &str, nodelay: bool) -> Result<Self> {
        let mut config = Config::from_url(url).map_err(err("redis url"))?;
        config.fail_fast = true;
        let client = Builder::from_config(config)
            .with_connection_config(|c| c.tcp.nodelay = Some(nodelay))
            .build()
            .map_err(err("building the client"))?;
        client.init().await.map_err(err("connecting"))?;
        Ok(FredRaw {
            client,
            prefix: prefix.to_owned(),
        })
    }

    fn key(&self, queue: &str) -> String {
        format!("{}:raw:{queue}", self.prefix)
    }
}

#[async_trait]
impl Baseline for FredRaw {
    fn name(&self) -> &str {
        "fred-raw"
    }

    fn describe(&self) -> &str {
        "fred crate, one client: pipelined LPUSH of each payload, then pipelined RPOP"
    }

    async fn push(&self, queue: &str, payloads: &[Bytes]) -> Result<()> {
        let key = self.key(queue);
        let pipe = self.client.pipeline();
        for p in payloads {
            let () = pipe
                .lpush(&key, Value::Bytes(p.clone()))
                .await
                .map_err(err("LPUSH"))?;
        }
        let _: Vec<Value> = pipe.all().await.map_err(err("LPUSH"))?;
        Ok(())
    }

    async fn pop(&self, queue: &str, n: usize) -> Result<usize> {
        let key = self.key(queue);
        let pipe = self.client.pipeline();
        for _ in 0..n {
            let () = pipe.rpop(&key, None).await.map_err(err("RPOP"))?;
        }
        let got: Vec<Value> = pipe.all().await.map_err(err("RPOP"))?;
        Ok(got.iter().filter(|v| !v.is_null()).count())
    }

    async fn clear(&self, queue: &str) -> Result<()> {
        let _: i64 = self.client.del(self.key(queue)).await.map_err(err("DEL"))?;
        Ok(())
    }
}
