//! The adapter for the `redis` crate: a [`ConnectionManager`] (multiplexed,
//! reconnects by itself) for scripts on one server, or a cluster connection
//! (one multiplexed connection per node, routed by slot) on Redis Cluster,
//! and dedicated connections for the blocking wake-up pop.
//!
//! On a cluster the connection is built with no retries of its own: the
//! crate would otherwise send a request again after its connection dropped,
//! and a script cut off that way may already have run. Replies that prove a
//! script did not run (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`) come back
//! to [`crate::RedisBackend`], which sends the script again after a pause
//! (the `MOVED` has already made the connection refresh its slot map).
//!
//! TLS (`rediss://`, feature `tls`) is the crate's rustls support: the
//! system's roots, or [`RedisOptions::tls_root_cert`] in their place.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use leaseq_core::{Error, Result};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{AsyncConnectionConfig, Client, Cmd, IntoConnectionInfo, RedisError, Value};

use super::{block_secs, replicas_acked, IdlePool, NodeReply, STREAM_BATCH};
use crate::{ClientError, RedisBackend, RedisOptions, Reply, Script, ScriptClient};

/// A [`RedisBackend`] on the `redis` crate.
pub type RedisRsBackend = RedisBackend<RedisRsClient>;

impl RedisBackend<RedisRsClient> {
    /// Connects to the server in `config` (the first connection is made now,
    /// so an unreachable server is an error here).
    pub async fn connect(config: RedisOptions) -> Result<Self> {
        config.check()?;
        let client = RedisRsClient::connect(&config).await?;
        RedisBackend::with_client(client, config)?
            .verify_server()
            .await
    }
}

/// [`ScriptClient`] on the `redis` crate, for one server or a cluster.
pub struct RedisRsClient {
    inner: Inner,
    server: String,
}

/// One server, or a cluster.
enum Inner {
    Single {
        client: Client,
        manager: ConnectionManager,
        wait_config: AsyncConnectionConfig,
        idle: IdlePool<MultiplexedConnection>,
    },
    Cluster {
        connection: ClusterConnection,
        /// Builds the connections for blocking pops (no response timeout).
        waits: ClusterClient,
        idle: IdlePool<ClusterConnection>,
    },
}

impl fmt::Debug for RedisRsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRsClient")
            .field("server", &self.server)
            .finish()
    }
}

fn cluster_builder(config: &RedisOptions) -> ClusterClientBuilder {
    let builder = ClusterClientBuilder::new(config.seeds.iter().map(String::as_str))
        .connection_timeout(config.connect_timeout)
        .tcp_settings(tcp_settings(config))
        .retries(0);
    #[cfg(feature = "tls")]
    let builder = if config.uses_tls() {
        let builder = builder.tls(redis::TlsMode::Secure);
        match config.root_cert_pem() {
            Some(pem) => builder.certs(tls_certificates(pem)),
            None => builder,
        }
    } else {
        builder
    };
    builder
}

/// The CA certificates of [`RedisOptions::tls_root_cert`], in the crate's
/// form (no client certificate).
#[cfg(feature = "tls")]
fn tls_certificates(pem: &[u8]) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem.to_vec()),
    }
}

/// `TCP_NODELAY` as [`RedisOptions::tcp_nodelay`] says (the crate's default
/// is off), and keep-alive as [`RedisOptions::tcp_keepalive`] says.
fn tcp_settings(config: &RedisOptions) -> redis::io::tcp::TcpSettings {
    use redis::io::tcp::socket2::TcpKeepalive;
    let settings = redis::io::tcp::TcpSettings::default().set_nodelay(config.tcp_nodelay);
    match config.tcp_keepalive {
        Some(idle) => settings.set_keepalive(TcpKeepalive::new().with_time(idle)),
        None => settings,
    }
}

/// The client for one server; for a TLS URL, one that speaks TLS (with
/// the configured roots), or an error, never a plaintext one.
fn single_client(config: &RedisOptions) -> Result<Client> {
    let invalid =
        |e: RedisError| Error::invalid(format!("redis url {:?}: {e}", config.shown_url()));
    let info = config
        .url
        .as_str()
        .into_connection_info()
        .map_err(invalid)?
        .set_tcp_settings(tcp_settings(config));
    #[cfg(feature = "tls")]
    let client = match config.root_cert_pem() {
        Some(pem) => Client::build_with_tls(info, tls_certificates(pem)),
        None => Client::open(info),
    }
    .map_err(invalid)?;
    #[cfg(not(feature = "tls"))]
    let client = Client::open(info).map_err(invalid)?;
    let is_tls = matches!(
        client.get_connection_info().addr(),
        redis::ConnectionAddr::TcpTls { .. }
    );
    if config.uses_tls() && !is_tls {
        return Err(Error::invalid(format!(
            "redis url {:?} asks for TLS, which this client cannot give it",
            config.shown_url()
        )));
    }
    Ok(client)
}

/// Whether the server refused the login (a bad password or user, or a
/// password it needs and was not given).
fn auth_refused(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
}

impl RedisRsClient {
    /// Opens the connection manager for `config`'s server, or the cluster
    /// connection for its seed nodes.
    pub async fn connect(config: &RedisOptions) -> Result<Self> {
        if config.is_cluster() {
            return Self::connect_cluster(config).await;
        }
        #[cfg(feature = "tls")]
        if config.uses_tls() {
            crate::options::install_crypto_provider();
        }
        let client = single_client(config)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.response_timeout))
            .set_connection_timeout(Some(config.connect_timeout))
            .set_number_of_retries(3)
            .set_max_delay(Duration::from_millis(500));
        // No call was made yet, so a failure here applied nothing.
        let manager = ConnectionManager::new_with_config(client.clone(), manager_config)
            .await
            .map_err(|e| config.connect_failed(auth_refused(&e), e))?;
        // Blocking pops answer when their own timeout passes: no response
        // timeout on those connections (the caller bounds the wait).
        let wait_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(config.connect_timeout))
            .set_response_timeout(None);
        Ok(RedisRsClient {
            inner: Inner::Single {
                client,
                manager,
                wait_config,
                idle: IdlePool::new(config.idle_wait_connections),
            },
            server: config.shown_url(),
        })
    }

    async fn connect_cluster(config: &RedisOptions) -> Result<Self> {
        #[cfg(feature = "tls")]
        if config.uses_tls() {
            crate::options::install_crypto_provider();
        }
        let invalid =
            |e: RedisError| Error::invalid(format!("redis cluster {:?}: {e}", config.shown_url()));
        let client = cluster_builder(config)
            .response_timeout(config.response_timeout)
            .build()
            .map_err(invalid)?;
        let connection = client
            .get_async_connection()
            .await
            .map_err(|e| config.connect_failed(auth_refused(&e), e))?;
        // Blocking pops answer when their own timeout passes; the caller's
        // guard covers a node that stopped answering.
        let waits = cluster_builder(config)
            .response_timeout(Duration::from_secs(24 * 3600))
            .build()
            .map_err(invalid)?;
        Ok(RedisRsClient {
            inner: Inner::Cluster {
                connection,
                waits,
                idle: IdlePool::new(config.idle_wait_connections),
            },
            server: config.shown_url(),
        })
    }

    /// Sends one command on the script connection (routed by its first key
    /// on a cluster).
    async fn query(&self, cmd: &Cmd) -> redis::RedisResult<Value> {
        match &self.inner {
            Inner::Single { manager, .. } => cmd.query_async(&mut manager.clone()).await,
            Inner::Cluster { connection, .. } => cmd.query_async(&mut connection.clone()).await,
        }
    }

    /// `EVALSHA`, or `EVAL` with the source (which also caches the script on
    /// the node that runs it) when `with_source`.
    async fn run_script(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
        with_source: bool,
    ) -> redis::RedisResult<Value> {
        self.query(&script_cmd(script, keys, args, with_source))
            .await
    }

    /// [`RedisRsClient::run_script`] and `WAIT replicas timeout_ms`, one
    /// pipeline on one connection: on a cluster the pipeline goes to the
    /// node of the script's keys (`WAIT` names none). Each reply comes
    /// back on its own, errors included.
    async fn run_script_wait(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
        with_source: bool,
        (replicas, timeout_ms): (u32, u64),
    ) -> redis::RedisResult<(Value, Value)> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors()
            .add_command(script_cmd(script, keys, args, with_source))
            .cmd("WAIT")
            .arg(replicas)
            .arg(timeout_ms);
        let mut replies: Vec<Value> = match &self.inner {
            Inner::Single { manager, .. } => pipe.query_async(&mut manager.clone()).await?,
            Inner::Cluster { connection, .. } => pipe.query_async(&mut connection.clone()).await?,
        };
        match (replies.pop(), replies.pop()) {
            (Some(wait), Some(ran)) if replies.is_empty() => Ok((ran, wait)),
            _ => Err(RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "a script and WAIT answered with other than two replies",
            ))),
        }
    }
}

/// The command that runs `script`: `EVALSHA`, or `EVAL` with the source.
fn script_cmd(script: &Script, keys: &[String], args: &[Bytes], with_source: bool) -> Cmd {
    let mut cmd = if with_source {
        let mut c = redis::cmd("EVAL");
        c.arg(script.source());
        c
    } else {
        let mut c = redis::cmd("EVALSHA");
        c.arg(script.sha());
        c
    };
    cmd.arg(keys.len()).arg(keys);
    for a in args {
        cmd.arg(a.as_ref());
    }
    cmd
}

/// The script's reply of a pipelined run, and whether it was `NOSCRIPT`.
fn is_noscript_value(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.code() == "NOSCRIPT")
}

/// Failures that prove the command was never written: the connection was
/// refused (only a connection attempt is refused; an established connection
/// that breaks is reset), or the cluster connection had no node to send it
/// to. Timeouts are not among them: a connect timeout and a response
/// timeout look alike.
fn is_unsent(e: &RedisError) -> bool {
    e.is_connection_refusal() || e.kind() == redis::ErrorKind::ClusterConnectionNotFound
}

fn client_error(e: RedisError) -> ClientError {
    if is_unsent(&e) {
        return ClientError::unsent(e);
    }
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

/// An admin command's reply: [`convert`], plus the shapes only such
/// commands return (RESP3 maps flattened, verbatim strings, doubles).
fn convert_admin(v: Value) -> std::result::Result<Reply, ClientError> {
    Ok(match v {
        Value::Map(pairs) => {
            let mut out = Vec::with_capacity(pairs.len() * 2);
            for (k, v) in pairs {
                out.push(convert_admin(k)?);
                out.push(convert_admin(v)?);
            }
            Reply::Array(out)
        }
        Value::VerbatimString { text, .. } => Reply::Data(Bytes::from(text)),
        Value::Double(d) => Reply::Data(Bytes::from(d.to_string())),
        Value::Array(a) => Reply::Array(
            a.into_iter()
                .map(convert_admin)
                .collect::<std::result::Result<_, _>>()?,
        ),
        other => convert(other)?,
    })
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
        // NOSCRIPT: the node does not know the script (never loaded, a
        // restart, a failover, or a slot that moved to another node), so it
        // did not run; `EVAL` sends the source to whichever node owns the
        // slot and caches it there.
        let reply = match self.run_script(script, keys, args, false).await {
            Err(e) if is_noscript(&e) => self.run_script(script, keys, args, true).await,
            other => other,
        };
        convert(reply.map_err(client_error)?)
    }

    async fn eval_wait(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
        replicas: u32,
        timeout_ms: u64,
    ) -> std::result::Result<(Reply, std::result::Result<i64, ClientError>), ClientError> {
        let wait = (replicas, timeout_ms);
        let mut replies = self
            .run_script_wait(script, keys, args, false, wait)
            .await
            .map_err(client_error)?;
        // NOSCRIPT: nothing ran; send the source (and the wait) again.
        if is_noscript_value(&replies.0) {
            replies = self
                .run_script_wait(script, keys, args, true, wait)
                .await
                .map_err(client_error)?;
        }
        let (ran, waited) = replies;
        Ok((convert(ran)?, replicas_acked(convert(waited))))
    }

    async fn admin(&self, args: &[&str]) -> std::result::Result<Vec<NodeReply>, ClientError> {
        let Some((name, rest)) = args.split_first() else {
            return Ok(Vec::new());
        };
        let mut cmd = redis::cmd(name);
        for a in rest {
            cmd.arg(*a);
        }
        match &self.inner {
            Inner::Single { manager, .. } => {
                let reply = cmd
                    .query_async::<Value>(&mut manager.clone())
                    .await
                    .map_err(client_error)
                    .and_then(convert_admin);
                Ok(vec![NodeReply {
                    node: self.server.clone(),
                    reply,
                }])
            }
            Inner::Cluster { connection, .. } => {
                // Every master, each reply kept apart (no response policy:
                // a map of node address to reply or error).
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                let v = connection
                    .clone()
                    .route_command(cmd, routing)
                    .await
                    .map_err(client_error)?;
                let Value::Map(nodes) = v else {
                    return Err(ClientError::transport(format!(
                        "unexpected reply from every master: {v:?}"
                    )));
                };
                Ok(nodes
                    .into_iter()
                    .map(|(node, reply)| NodeReply {
                        node: match node {
                            Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
                            Value::SimpleString(s) => s,
                            other => format!("{other:?}"),
                        },
                        reply: convert_admin(reply),
                    })
                    .collect())
            }
        }
    }

    async fn wait_marker(
        &self,
        key: &str,
        timeout: Duration,
    ) -> std::result::Result<bool, ClientError> {
        let v = self.wait_on(pop(key, timeout), timeout).await?;
        Ok(!matches!(v, Value::Nil))
    }

    async fn wait_stream(
        &self,
        key: &str,
        after: &str,
        timeout: Duration,
    ) -> std::result::Result<Reply, ClientError> {
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(STREAM_BATCH)
            .arg("BLOCK")
            .arg(u64::try_from(timeout.as_millis().max(1)).unwrap_or(u64::MAX))
            .arg("STREAMS")
            .arg(key)
            .arg(after);
        convert(self.wait_on(cmd, timeout).await?)
    }
}

impl RedisRsClient {
    /// Runs the blocking `cmd` on a dedicated connection (see [`blocking`]).
    async fn wait_on(
        &self,
        cmd: Cmd,
        timeout: Duration,
    ) -> std::result::Result<Value, ClientError> {
        match &self.inner {
            Inner::Single {
                client,
                wait_config,
                idle,
                ..
            } => {
                let conn = match idle.take() {
                    Some(c) => c,
                    None => client
                        .get_multiplexed_async_connection_with_config(wait_config)
                        .await
                        .map_err(client_error)?,
                };
                blocking(conn, idle, cmd, timeout).await
            }
            Inner::Cluster { waits, idle, .. } => {
                let conn = match idle.take() {
                    Some(c) => c,
                    None => waits.get_async_connection().await.map_err(client_error)?,
                };
                blocking(conn, idle, cmd, timeout).await
            }
        }
    }
}

/// `BLPOP key timeout`.
fn pop(key: &str, timeout: Duration) -> Cmd {
    let mut cmd = redis::cmd("BLPOP");
    cmd.arg(key).arg(block_secs(timeout));
    cmd
}

/// A blocking command (`BLPOP`, `XREAD BLOCK`) on a dedicated connection,
/// kept for the next waiter when it answered. The server ends the wait at
/// `timeout`; the guard covers a server that stopped answering. A
/// connection that timed out is dropped.
async fn blocking<C: redis::aio::ConnectionLike + Send>(
    mut conn: C,
    idle: &IdlePool<C>,
    cmd: Cmd,
    timeout: Duration,
) -> std::result::Result<Value, ClientError> {
    let wait = cmd.query_async::<Value>(&mut conn);
    match tokio::time::timeout(timeout + Duration::from_secs(1), wait).await {
        Ok(Ok(v)) => {
            drop(idle.give_back(conn));
            Ok(v)
        }
        Ok(Err(e)) => Err(client_error(e)),
        Err(_) => Err(ClientError::transport(
            "a blocking wait got no answer in time",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_settings_follow_the_options() {
        let plain = tcp_settings(&RedisOptions::new("redis://h:1"));
        assert!(plain.nodelay());
        assert!(plain.keepalive().is_none());
        let set = tcp_settings(
            &RedisOptions::new("redis://h:1")
                .tcp_nodelay(false)
                .tcp_keepalive(Some(Duration::from_secs(30))),
        );
        assert!(!set.nodelay());
        assert!(set.keepalive().is_some());
    }
}
