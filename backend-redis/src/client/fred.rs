//! The adapter for the `fred` crate: one client (one multiplexed connection
//! that reconnects by itself) for scripts, and dedicated clients for the
//! blocking wake-up pop. On Redis Cluster each client is a clustered one:
//! it discovers the nodes from the seeds and routes each script by its
//! first key's slot. It follows no redirection itself (see
//! [`cluster_options`]): a `MOVED` makes it reload the slot map and an
//! `ASK` comes back as `TRYAGAIN`, which the backend sends again (the node
//! refused the command, so it did not run); it sends nothing twice after a
//! dropped connection.
//!
//! TLS (`rediss://`, `rediss+cluster://`, feature `tls`) is fred's rustls
//! connector, with the system's roots or [`RedisOptions::tls_root_cert`]
//! in their place. fred itself reads `rediss://` as plaintext when built
//! without TLS; [`FredClient::connect`] refuses that (see [`tls_config`]).

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use fred::clients::Pipeline;
use fred::prelude::{
    Builder, ClientLike, Config, Error as FredError, ErrorKind, ListInterface, LuaInterface,
    Options, ReconnectPolicy, ServerConfig, StreamsInterface, Value,
};
use fred::types::config::TcpConfig;
use fred::types::{ClusterHash, CustomCommand};
use leaseq_core::{Error, Result};

use super::{block_secs, replicas_acked, IdlePool, NodeReply, STREAM_BATCH};
use crate::{ClientError, RedisBackend, RedisOptions, Reply, Script, ScriptClient};

/// A [`RedisBackend`] on the `fred` crate.
pub type FredBackend = RedisBackend<FredClient>;

impl RedisBackend<FredClient> {
    /// Connects to the server in `config` (the first connection is made now,
    /// so an unreachable server is an error here).
    pub async fn connect(config: RedisOptions) -> Result<Self> {
        config.check()?;
        let client = FredClient::connect(&config).await?;
        RedisBackend::with_client(client, config)?
            .verify_server()
            .await
    }
}

/// [`ScriptClient`] on the `fred` crate.
pub struct FredClient {
    main: fred::clients::Client,
    /// Per-command options on a cluster (see [`cluster_options`]).
    cluster: Option<Options>,
    base: Config,
    connect_timeout: Duration,
    /// The socket settings of every connection ([`tcp_config`]).
    tcp: TcpConfig,
    idle: IdlePool<fred::clients::Client>,
}

impl fmt::Debug for FredClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FredClient")
            .field("server", &self.base.server)
            .finish()
    }
}

impl Drop for FredClient {
    fn drop(&mut self) {
        // Stop the clients' reconnect tasks; nothing waits for the answer.
        let mut clients = vec![self.main.clone()];
        while let Some(c) = self.idle.take() {
            clients.push(c);
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for c in clients {
                    let _ = c.quit().await;
                }
            });
        }
    }
}

/// A client for `base`. Commands are sent once: a script cut off by a dropped
/// connection is reported, never replayed (a replayed enqueue would write
/// its items twice).
fn build(
    base: &Config,
    command_timeout: Duration,
    connect_timeout: Duration,
    tcp: &TcpConfig,
) -> Result<fred::clients::Client> {
    Builder::from_config(base.clone())
        .with_connection_config(|c| {
            c.tcp = tcp.clone();
            c.connection_timeout = connect_timeout;
            c.internal_command_timeout = connect_timeout;
            c.max_command_attempts = 1;
            // Follow no redirection (see `cluster_options`).
            c.max_redirections = 0;
        })
        .with_performance_config(|p| {
            p.default_command_timeout = command_timeout;
        })
        .set_policy(ReconnectPolicy::new_exponential(0, 100, 1_000, 2))
        .build()
        .map_err(|e| Error::invalid(format!("redis client settings: {e}")))
}

/// `TCP_NODELAY` as [`RedisOptions::tcp_nodelay`] says and keep-alive as
/// [`RedisOptions::tcp_keepalive`] says; the rest as the crate sets it.
fn tcp_config(config: &RedisOptions) -> TcpConfig {
    TcpConfig {
        nodelay: Some(config.tcp_nodelay),
        keepalive: config
            .tcp_keepalive
            .map(|idle| socket2::TcpKeepalive::new().with_time(idle)),
        ..TcpConfig::default()
    }
}

async fn start(
    client: &fred::clients::Client,
    timeout: Duration,
) -> std::result::Result<(), FredError> {
    match tokio::time::timeout(timeout, client.init()).await {
        Ok(r) => r.map(|_| ()),
        Err(_) => {
            let _ = client.quit().await;
            Err(FredError::new(ErrorKind::Timeout, "no connection in time"))
        }
    }
}

impl FredClient {
    /// Connects a client to `config`'s server, or to its cluster.
    pub async fn connect(config: &RedisOptions) -> Result<Self> {
        #[cfg(feature = "tls")]
        if config.uses_tls() {
            crate::options::install_crypto_provider();
        }
        let mut base = if config.is_cluster() {
            cluster_config(config)?
        } else {
            Config::from_url(&config.url)
                .map_err(|e| Error::invalid(format!("redis url {:?}: {e}", config.shown_url())))?
        };
        tls_config(config, &mut base)?;
        base.fail_fast = true;
        let tcp = tcp_config(config);
        let main = build(&base, config.response_timeout, config.connect_timeout, &tcp)?;
        // No call was made yet, so a failure here applied nothing.
        start(&main, config.connect_timeout)
            .await
            .map_err(|e| config.connect_failed(*e.kind() == ErrorKind::Auth, e))?;
        Ok(FredClient {
            cluster: config.is_cluster().then(cluster_options),
            main,
            base,
            connect_timeout: config.connect_timeout,
            tcp,
            idle: IdlePool::new(config.idle_wait_connections),
        })
    }
}

/// Per-command options on a cluster. `fail_fast` fails a command that was
/// in flight on a connection that closed (it may have run) instead of
/// writing it again; the attempts let fred write again a command it could
/// not route (it was never sent).
///
/// No redirection is followed (fred reads a redirection limit of 0 from the
/// connection settings made in [`build`]). A `MOVED` still makes fred
/// reload the slot map before it fails the command with "Too many
/// redirections" (sent again by the backend, to the new owner). Following
/// an `ASK` is unsafe in fred: it writes `ASKING` on the target's shared
/// connection and takes the next reply there as its answer, though that
/// reply may belong to another command in flight; when that fails a few
/// times it ends its routing task, every command in flight is dropped
/// ("channel closed") and every later one waits until it times out. With no
/// redirections an `ASK` fails only that command, before it ran.
fn cluster_options() -> Options {
    Options {
        max_attempts: Some(8),
        max_redirections: Some(0),
        fail_fast: true,
        ..Options::default()
    }
}

impl FredClient {
    /// On one server: waits (up to the connect timeout) while the client is
    /// reconnecting, and fails without sending when it is still not
    /// connected. A command handed to fred while it reconnects waits in its
    /// buffer, and when it then times out nobody can tell whether it was
    /// written; a command never handed over certainly was not.
    async fn connected(&self) -> std::result::Result<(), ClientError> {
        if self.main.is_connected() {
            return Ok(());
        }
        let waited = tokio::time::timeout(self.connect_timeout, self.main.wait_for_connect()).await;
        if self.main.is_connected() {
            return Ok(());
        }
        let server = &self.base.server;
        Err(ClientError::unsent(match waited {
            Ok(Err(e)) => format!("not connected to {server:?}: {e}"),
            _ => format!(
                "not connected to {server:?} (still reconnecting after {:?})",
                self.connect_timeout
            ),
        }))
    }
}

/// What a script and the `WAIT` after it answered, each on its own.
type ScriptAndWait = (
    std::result::Result<Value, FredError>,
    std::result::Result<Value, FredError>,
);

impl FredClient {
    /// A command's error, judged as this client's kind (one server or a
    /// cluster) reports it.
    fn error(&self, e: FredError) -> ClientError {
        match &self.cluster {
            Some(_) => cluster_error(e),
            None => client_error(e),
        }
    }

    /// `EVALSHA` (or `EVAL` with the source, `with_source`) and `WAIT
    /// replicas timeout_ms` in one pipeline. Both name the slot of the
    /// script's first key, so on a cluster both go to the node that serves
    /// it, on its one connection, in order.
    async fn script_and_wait(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
        with_source: bool,
        (replicas, timeout_ms): (u32, u64),
    ) -> std::result::Result<ScriptAndWait, ClientError> {
        let slot = keys
            .first()
            .map_or(0, |k| crate::keys::key_slot(k.as_bytes()));
        let (name, body) = if with_source {
            ("EVAL", Bytes::copy_from_slice(script.source().as_bytes()))
        } else {
            ("EVALSHA", Bytes::from(script.sha().to_owned()))
        };
        let mut run = Vec::with_capacity(2 + keys.len() + args.len());
        run.push(Value::Bytes(body));
        run.push(Value::Integer(
            i64::try_from(keys.len()).unwrap_or(i64::MAX),
        ));
        run.extend(keys.iter().map(|k| Value::Bytes(Bytes::from(k.clone()))));
        run.extend(args.iter().cloned().map(Value::Bytes));
        let wait = vec![
            Value::Integer(i64::from(replicas)),
            Value::Integer(i64::try_from(timeout_ms).unwrap_or(i64::MAX)),
        ];
        let hash = ClusterHash::Custom(slot);
        let results = match &self.cluster {
            Some(o) => {
                let pipe = Pipeline::from(self.main.with_options(o));
                queue_pair(&pipe, name, run, wait, hash).await?;
                pipe.try_all::<Value>().await
            }
            None => {
                let pipe = self.main.pipeline();
                queue_pair(&pipe, name, run, wait, hash).await?;
                pipe.try_all::<Value>().await
            }
        };
        let n = results.len();
        let mut results = results.into_iter();
        match (results.next(), results.next(), results.next()) {
            (Some(ran), Some(waited), None) => Ok((ran, waited)),
            (first, second, _) => Err(ClientError::transport(pair_broken(n, first, second))),
        }
    }
}

/// What a script and `WAIT` pipeline that did not answer with two replies
/// answered: the first error among its replies when there is one (a cut
/// connection answers so), which is the cause the caller needs to see,
/// otherwise how many replies came. Reported as a transport failure either
/// way: the script may have run.
fn pair_broken(
    n: usize,
    first: Option<std::result::Result<Value, FredError>>,
    second: Option<std::result::Result<Value, FredError>>,
) -> String {
    match [first, second].into_iter().flatten().find_map(|r| r.err()) {
        Some(e) => {
            format!("a script and WAIT: {n} replies instead of two, the connection failed: {e}")
        }
        None => format!("a script and WAIT answered with {n} replies instead of two"),
    }
}

/// Queues the script (`name` with `run`) and `WAIT` (`wait`) on `pipe`.
async fn queue_pair<C: ClientLike>(
    pipe: &Pipeline<C>,
    name: &str,
    run: Vec<Value>,
    wait: Vec<Value>,
    hash: ClusterHash,
) -> std::result::Result<(), ClientError> {
    let queued = |e: FredError| ClientError::unsent(e);
    pipe.custom::<Value, _>(
        CustomCommand::new(name.to_owned(), hash.clone(), false),
        run,
    )
    .await
    .map_err(queued)?;
    pipe.custom::<Value, _>(CustomCommand::new("WAIT", hash, false), wait)
        .await
        .map_err(queued)?;
    Ok(())
}

/// Sets `base`'s TLS from `config`: for a TLS URL, fred's rustls connector
/// with the configured roots (else the system's); for any other, none.
/// A TLS URL left without a connector (no `tls` feature) is an error:
/// fred would dial it in plaintext.
fn tls_config(config: &RedisOptions, base: &mut Config) -> Result<()> {
    #[cfg(feature = "tls")]
    if config.uses_tls() {
        use fred::types::config::TlsConnector;
        let connector = match config.tls_roots()? {
            Some(roots) => TlsConnector::from(
                rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            ),
            None => TlsConnector::default_rustls().map_err(|e| {
                Error::invalid(format!("TLS settings for {}: {e}", config.shown_url()))
            })?,
        };
        base.tls = Some(connector.into());
    }
    if config.uses_tls() && !base.uses_tls() {
        return Err(Error::invalid(format!(
            "redis url {:?} asks for TLS, but leaseq-redis was built without TLS support; \
             enable the `tls` feature (of `leaseq` or `leaseq-redis`)",
            config.shown_url()
        )));
    }
    Ok(())
}

/// A clustered client config for `config`'s seed nodes.
fn cluster_config(config: &RedisOptions) -> Result<Config> {
    let mut hosts = Vec::with_capacity(config.seeds.len());
    for seed in &config.seeds {
        let hp = crate::cluster_url::host_port(seed)
            .ok_or_else(|| Error::invalid(format!("cluster seed {seed:?} is not host:port")))?;
        hosts.push(hp);
    }
    let (username, password) = config
        .seeds
        .first()
        .map(|s| crate::cluster_url::credentials(s))
        .unwrap_or((None, None));
    Ok(Config {
        server: ServerConfig::new_clustered(hosts),
        username,
        password,
        ..Config::default()
    })
}

/// The error fred gives a `fail_fast` command while the client is not
/// connected: it fails the command before handing it to its router, so the
/// command was never written. (A connection error handed to a command that
/// was in flight is not this one: that command may have run.)
fn is_unsent(e: &FredError) -> bool {
    *e.kind() == ErrorKind::Canceled && e.details() == "Connection closed unexpectedly."
}

fn client_error(e: FredError) -> ClientError {
    if is_unsent(&e) {
        return ClientError::unsent(e);
    }
    match e.kind() {
        ErrorKind::IO
        | ErrorKind::Timeout
        | ErrorKind::Canceled
        | ErrorKind::Routing
        | ErrorKind::Protocol
        | ErrorKind::Backpressure
        | ErrorKind::Config
        | ErrorKind::Url
        | ErrorKind::Parse => ClientError::transport(e),
        _ => ClientError::server(e.details().to_owned(), e),
    }
}

/// On a cluster, with `fail_fast` set, a command in flight on a closed
/// connection fails with that connection's error and is never written
/// again; so running out of write attempts or redirections means every
/// write so far was refused (`MOVED` / `ASK` while the slot map settles) or
/// never reached a server: the script did not run, and the backend may send
/// it again (reported as `TRYAGAIN`).
fn cluster_error(e: FredError) -> ClientError {
    let d = e.details();
    if d.starts_with("Too many failed write attempts") || d.starts_with("Too many redirections") {
        let msg = format!("TRYAGAIN {d}");
        return ClientError::server(msg, e);
    }
    client_error(e)
}

/// An admin command's reply: [`convert`], plus the shapes only such
/// commands return (RESP3 maps flattened, doubles).
fn convert_admin(v: Value) -> std::result::Result<Reply, ClientError> {
    Ok(match v {
        Value::Map(map) => {
            let mut out = Vec::new();
            for (k, v) in map.inner() {
                out.push(Reply::Data(k.inner().clone()));
                out.push(convert_admin(v)?);
            }
            Reply::Array(out)
        }
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
        Value::Null => Reply::Nil,
        Value::Integer(n) => Reply::Int(n),
        Value::Boolean(b) => Reply::Int(i64::from(b)),
        Value::String(s) => Reply::Data(s.into_inner()),
        Value::Bytes(b) => Reply::Data(b),
        Value::Array(a) => Reply::Array(
            a.into_iter()
                .map(convert)
                .collect::<std::result::Result<_, _>>()?,
        ),
        other => {
            return Err(ClientError::transport(format!(
                "unexpected reply type from a script: {other:?}"
            )))
        }
    })
}

#[async_trait]
impl ScriptClient for FredClient {
    async fn eval(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
    ) -> std::result::Result<Reply, ClientError> {
        if self.cluster.is_none() {
            self.connected().await?;
        }
        let keys: Vec<String> = keys.to_vec();
        let vals: Vec<Value> = args.iter().cloned().map(Value::Bytes).collect();
        let first = match &self.cluster {
            Some(o) => {
                self.main
                    .with_options(o)
                    .evalsha::<Value, _, _, _>(script.sha(), keys.clone(), vals.clone())
                    .await
            }
            None => {
                self.main
                    .evalsha::<Value, _, _, _>(script.sha(), keys.clone(), vals.clone())
                    .await
            }
        };
        // NOSCRIPT: the node did not run it. `EVAL` sends the source to the
        // node that owns the slot (on a cluster, `SCRIPT LOAD` would go to
        // any node) and caches it there.
        let reply = match first {
            Err(e) if e.details().starts_with("NOSCRIPT") => match &self.cluster {
                Some(o) => {
                    self.main
                        .with_options(o)
                        .eval::<Value, _, _, _>(script.source(), keys, vals)
                        .await
                }
                None => {
                    self.main
                        .eval::<Value, _, _, _>(script.source(), keys, vals)
                        .await
                }
            },
            other => other,
        };
        convert(reply.map_err(|e| self.error(e))?)
    }

    async fn eval_wait(
        &self,
        script: &Script,
        keys: &[String],
        args: &[Bytes],
        replicas: u32,
        timeout_ms: u64,
    ) -> std::result::Result<(Reply, std::result::Result<i64, ClientError>), ClientError> {
        if self.cluster.is_none() {
            self.connected().await?;
        }
        let wait = (replicas, timeout_ms);
        let mut replies = self
            .script_and_wait(script, keys, args, false, wait)
            .await?;
        // NOSCRIPT: nothing ran; send the source (and the wait) again.
        if matches!(&replies.0, Err(e) if e.details().starts_with("NOSCRIPT")) {
            replies = self.script_and_wait(script, keys, args, true, wait).await?;
        }
        let (ran, waited) = replies;
        let reply = convert(ran.map_err(|e| self.error(e))?)?;
        let waited = waited.map_err(|e| self.error(e)).and_then(convert);
        Ok((reply, replicas_acked(waited)))
    }

    async fn admin(&self, args: &[&str]) -> std::result::Result<Vec<NodeReply>, ClientError> {
        let Some((name, rest)) = args.split_first() else {
            return Ok(Vec::new());
        };
        let cmd = || CustomCommand::new(name.to_string(), ClusterHash::Random, false);
        let rest: Vec<String> = rest.iter().map(|a| a.to_string()).collect();
        if self.cluster.is_none() {
            self.connected().await?;
            let reply = self
                .main
                .custom::<Value, _>(cmd(), rest)
                .await
                .map_err(client_error)
                .and_then(convert_admin);
            return Ok(vec![NodeReply {
                node: format!("{:?}", self.base.server),
                reply,
            }]);
        }
        // On a cluster fred holds one connection per master (no replicas).
        let nodes = self.main.active_connections();
        if nodes.is_empty() {
            return Err(ClientError::unsent("no cluster master connected"));
        }
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            let reply = self
                .main
                .with_cluster_node(node.clone())
                .custom::<Value, _>(cmd(), rest.clone())
                .await
                .map_err(client_error)
                .and_then(convert_admin);
            out.push(NodeReply {
                node: node.to_string(),
                reply,
            });
        }
        Ok(out)
    }

    async fn wait_marker(
        &self,
        key: &str,
        timeout: Duration,
    ) -> std::result::Result<bool, ClientError> {
        let client = self.dedicated().await?;
        let pop = client.blpop::<Value, _>(key, block_secs(timeout));
        let v = self.finish_wait(client.clone(), timeout, pop).await?;
        Ok(!matches!(v, Value::Null))
    }

    async fn wait_stream(
        &self,
        key: &str,
        after: &str,
        timeout: Duration,
    ) -> std::result::Result<Reply, ClientError> {
        let client = self.dedicated().await?;
        let block = u64::try_from(timeout.as_millis().max(1)).unwrap_or(u64::MAX);
        let read =
            client.xread::<Value, _, _>(Some(u64::from(STREAM_BATCH)), Some(block), key, after);
        convert(self.finish_wait(client.clone(), timeout, read).await?)
    }
}

impl FredClient {
    /// An idle connection for a blocking wait, or a new one.
    async fn dedicated(&self) -> std::result::Result<fred::clients::Client, ClientError> {
        if let Some(c) = self.idle.take() {
            return Ok(c);
        }
        // No command timeout: the server ends the wait; the guard in
        // `finish_wait` covers a server that stopped answering.
        let c = build(&self.base, Duration::ZERO, self.connect_timeout, &self.tcp)
            .map_err(ClientError::transport)?;
        start(&c, self.connect_timeout)
            .await
            .map_err(client_error)?;
        Ok(c)
    }

    /// Awaits the blocking `wait` sent on `client`: the connection goes
    /// back to the idle pool when it answered, and is closed otherwise.
    async fn finish_wait(
        &self,
        client: fred::clients::Client,
        timeout: Duration,
        wait: impl std::future::Future<Output = std::result::Result<Value, FredError>>,
    ) -> std::result::Result<Value, ClientError> {
        match tokio::time::timeout(timeout + Duration::from_secs(1), wait).await {
            Ok(Ok(v)) => {
                if let Some(extra) = self.idle.give_back(client) {
                    let _ = extra.quit().await;
                }
                Ok(v)
            }
            Ok(Err(e)) => {
                let _ = client.quit().await;
                Err(client_error(e))
            }
            Err(_) => {
                let _ = client.quit().await;
                Err(ClientError::transport(
                    "a blocking wait got no answer in time",
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_settings_follow_the_options() {
        let plain = tcp_config(&RedisOptions::new("redis://h:1"));
        assert_eq!(plain.nodelay, Some(true));
        assert!(plain.keepalive.is_none());
        let set = tcp_config(
            &RedisOptions::new("redis://h:1")
                .tcp_nodelay(false)
                .tcp_keepalive(Some(Duration::from_secs(30))),
        );
        assert_eq!(set.nodelay, Some(false));
        assert!(set.keepalive.is_some());
    }

    #[test]
    fn a_broken_pair_reports_the_connections_error() {
        let cut = FredError::new(ErrorKind::IO, "connection reset by peer");
        let said = pair_broken(1, Some(Err(cut)), None);
        assert!(said.contains("connection reset by peer"), "{said}");
        assert!(said.contains("1 replies instead of two"), "{said}");
        let said = pair_broken(3, Some(Ok(Value::Null)), Some(Ok(Value::Null)));
        assert_eq!(
            said,
            "a script and WAIT answered with 3 replies instead of two"
        );
    }
}
