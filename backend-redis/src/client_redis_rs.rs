//! The adapter for the `redis` crate: a [`ConnectionManager`] (multiplexed,
//! reconnects by itself) for scripts, and dedicated connections for the
//! blocking wake-up pop.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::{Error, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, RedisError, Value};

use crate::client::{block_secs, IdlePool};
use crate::{ClientError, RedisBackend, RedisConfig, Reply, Script, ScriptClient};

/// A [`RedisBackend`] on the `redis` crate.
pub type RedisRsBackend = RedisBackend<RedisRsClient>;

impl RedisBackend<RedisRsClient> {
    /// Connects to the server in `config` (the first connection is made now,
    /// so an unreachable server is an error here).
    pub async fn connect(config: RedisConfig) -> Result<Self> {
        config.check()?;
        let client = RedisRsClient::connect(&config).await?;
        RedisBackend::with_client(client, config)
    }
}

/// [`ScriptClient`] on the `redis` crate.
pub struct RedisRsClient {
    client: Client,
    manager: ConnectionManager,
    wait_config: AsyncConnectionConfig,
    idle: IdlePool<MultiplexedConnection>,
}

impl fmt::Debug for RedisRsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRsClient")
            .field("server", &self.client.get_connection_info().addr())
            .finish()
    }
}

impl RedisRsClient {
    /// Opens the connection manager for `config`'s server.
    pub async fn connect(config: &RedisConfig) -> Result<Self> {
        let client = Client::open(config.url.as_str())
            .map_err(|e| Error::invalid(format!("redis url {:?}: {e}", config.url)))?;
        let manager_config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.response_timeout))
            .set_connection_timeout(Some(config.connect_timeout))
            .set_number_of_retries(3)
            .set_max_delay(Duration::from_millis(500));
        let manager = ConnectionManager::new_with_config(client.clone(), manager_config)
            .await
            .map_err(|e| Error::backend(format!("connecting to {}", config.url), e))?;
        // Blocking pops answer when their own timeout passes: no response
        // timeout on those connections (the caller bounds the wait).
        let wait_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(None);
        Ok(RedisRsClient {
            client,
            manager,
            wait_config,
            idle: IdlePool::new(config.idle_wait_connections),
        })
    }

    async fn evalsha(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
    ) -> redis::RedisResult<Value> {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.sha()).arg(keys.len()).arg(keys);
        for a in args {
            cmd.arg(a.as_ref());
        }
        let mut conn = self.manager.clone();
        cmd.query_async::<Value>(&mut conn).await
    }
}

fn client_error(e: RedisError) -> ClientError {
    match e.code() {
        Some(code) => {
            let msg = match e.detail() {
                Some(d) => format!("{code} {d}"),
                None => code.to_owned(),
            };
            ClientError::server(msg, e)
        }
        None => ClientError::transport(e),
    }
}

fn is_noscript(e: &RedisError) -> bool {
    e.code() == Some("NOSCRIPT")
}

fn convert(v: Value) -> std::result::Result<Reply, ClientError> {
    Ok(match v {
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::BulkString(b) => Reply::Data(Bytes::from(b)),
        Value::SimpleString(s) => Reply::Data(Bytes::from(s)),
        Value::Okay => Reply::Data(Bytes::from_static(b"OK")),
        Value::Boolean(b) => Reply::Int(i64::from(b)),
        Value::Array(a) | Value::Set(a) => Reply::Array(
            a.into_iter()
                .map(convert)
                .collect::<std::result::Result<_, _>>()?,
        ),
        Value::ServerError(e) => {
            let msg = e.to_string();
            return Err(ClientError::server(msg, RedisError::from(e)));
        }
        other => {
            return Err(ClientError::transport(format!(
                "unexpected reply type from a script: {other:?}"
            )))
        }
    })
}

#[async_trait]
impl ScriptClient for RedisRsClient {
    async fn eval(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
    ) -> std::result::Result<Reply, ClientError> {
        let reply = match self.evalsha(script, keys, args).await {
            Err(e) if is_noscript(&e) => {
                let mut conn = self.manager.clone();
                redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(script.source())
                    .query_async::<String>(&mut conn)
                    .await
                    .map_err(client_error)?;
                self.evalsha(script, keys, args).await
            }
            other => other,
        };
        convert(reply.map_err(client_error)?)
    }

    async fn wait_marker(
        &self,
        key: &str,
        timeout: Duration,
    ) -> std::result::Result<bool, ClientError> {
        let mut conn = match self.idle.take() {
            Some(c) => c,
            None => self
                .client
                .get_multiplexed_async_connection_with_config(&self.wait_config)
                .await
                .map_err(client_error)?,
        };
        let mut cmd = redis::cmd("BLPOP");
        cmd.arg(key).arg(block_secs(timeout));
        let pop = cmd.query_async::<Value>(&mut conn);
        // The server ends the pop at `timeout`; the guard covers a server
        // that stopped answering. A connection that timed out is dropped.
        match tokio::time::timeout(timeout + Duration::from_secs(1), pop).await {
            Ok(Ok(v)) => {
                drop(self.idle.give_back(conn));
                Ok(!matches!(v, Value::Nil))
            }
            Ok(Err(e)) => Err(client_error(e)),
            Err(_) => Err(ClientError::transport("blocking pop got no answer in time")),
        }
    }
}
