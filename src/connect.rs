//! One place that turns a backend URL into an `Arc<dyn Backend>`.

use std::fmt;
use std::sync::Arc;

use leaseq_core::Backend;

/// A backend URL, parsed by scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendUrl {
    /// `memory://`: the in-process backend.
    Memory,
    /// `redis://…`, `rediss://…`, or `redis+cluster://host:port,host:port`.
    Redis(String),
    /// `postgres://…` or `postgresql://…`.
    Postgres(String),
    /// `sqlite://path/to/jobs.db` (a file, created if missing) or
    /// `sqlite::memory:`.
    Sqlite(String),
}

impl BackendUrl {
    /// Parses `url` by its scheme.
    pub fn parse(url: &str) -> Result<Self, ConnectError> {
        let url = url.trim();
        // `sqlite::memory:` and `sqlite:jobs.db` have no `//`.
        if url
            .get(..7)
            .is_some_and(|s| s.eq_ignore_ascii_case("sqlite:"))
        {
            return Ok(BackendUrl::Sqlite(url.to_string()));
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(ConnectError::BadUrl {
                url: leaseq_core::redact_url(url),
                why: "expected SCHEME://…, e.g. memory://, redis://127.0.0.1:6379, \
                      postgres://user@host/db or sqlite://jobs.db"
                    .into(),
            });
        };
        match scheme.to_ascii_lowercase().as_str() {
            "memory" if rest.is_empty() || rest == "/" => Ok(BackendUrl::Memory),
            "memory" => Err(ConnectError::BadUrl {
                url: leaseq_core::redact_url(url),
                why: "the memory backend takes no address: use memory://".into(),
            }),
            "redis" | "rediss" | "redis+cluster" | "rediss+cluster" => {
                Ok(BackendUrl::Redis(url.to_string()))
            }
            "postgres" | "postgresql" => Ok(BackendUrl::Postgres(url.to_string())),
            other => Err(ConnectError::BadUrl {
                url: leaseq_core::redact_url(url),
                why: format!(
                    "unknown scheme {other:?}; supported are memory, redis, rediss, \
                     redis+cluster, rediss+cluster, postgres, postgresql, sqlite"
                ),
            }),
        }
    }

    /// The backend's short name.
    pub fn kind(&self) -> &'static str {
        match self {
            BackendUrl::Memory => "memory",
            BackendUrl::Redis(_) => "redis",
            BackendUrl::Postgres(_) => "postgres",
            BackendUrl::Sqlite(_) => "sqlite",
        }
    }
}

/// Why [`connect`] failed. Its `Debug` is its message: a `main` that
/// returns the error prints `Debug`, and the message (a password masked)
/// is what the reader needs.
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is malformed or names an unknown scheme.
    BadUrl {
        /// The URL given, its password masked ([`leaseq_core::redact_url`]).
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The URL names a backend this build leaves out.
    NotCompiled {
        /// The backend's name.
        backend: &'static str,
        /// The cargo feature that brings it in.
        feature: &'static str,
    },
    /// The backend could not be reached or set up.
    Unreachable {
        /// The backend's name.
        backend: &'static str,
        /// The error.
        source: leaseq_core::Error,
    },
}

impl fmt::Debug for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Every message goes through [`leaseq_core::redact_secrets`]: a URL's
/// password never shows, whichever layer quoted the URL.
impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ConnectError::BadUrl { url, why } => format!("bad backend URL {url:?}: {why}"),
            ConnectError::NotCompiled { backend, feature } => {
                format!("this build has no {backend} backend; rebuild with `--features {feature}`")
            }
            ConnectError::Unreachable { backend, source } => {
                // The lead below says what kind of failure it was; the
                // error's own "rejected by the server:" would say it twice.
                let mut text = match source {
                    leaseq_core::Error::Rejected { message, .. }
                    | leaseq_core::Error::Unavailable { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                let mut cause = std::error::Error::source(source);
                while let Some(c) = cause {
                    let next = c.to_string();
                    if !text.contains(&next) {
                        text.push_str(": ");
                        text.push_str(&next);
                    }
                    cause = c.source();
                }
                match source {
                    leaseq_core::Error::Rejected { .. } => {
                        format!("the {backend} backend refused: {text}")
                    }
                    _ => format!("cannot reach the {backend} backend: {text}"),
                }
            }
        };
        f.write_str(&leaseq_core::redact_secrets(&text))
    }
}

/// No `source()`: the message already carries the whole chain of causes,
/// each once and with secrets masked. A reporter that walked the chain
/// itself would print each cause a second time, and unmasked (a driver's
/// error may quote the URL it was given). The cause stays reachable as
/// [`ConnectError::Unreachable`]'s `source` field.
impl std::error::Error for ConnectError {}

/// How [`connect_with`] sets a backend up, beyond what the URL says.
///
/// - **Namespace**: the PostgreSQL schema or the Redis key prefix. Also
///   accepted in the URL as `?schema=NAME` (postgres) or `?prefix=NAME`
///   (redis); an explicit value here wins. Defaults: schema `leaseq`, key
///   prefix `leaseq`. SQLite has none: the file is the namespace.
/// - **Migrate**: whether connecting may create or upgrade the PostgreSQL
///   schema (it needs `CREATE` on the database) or the SQLite file's
///   tables. [`connect`] does; admin tools and read-only roles pass
///   `migrate(false)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    namespace: Option<String>,
    migrate: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            namespace: None,
            migrate: true,
        }
    }
}

impl ConnectOptions {
    /// No namespace override; migrations on connect.
    pub fn new() -> Self {
        Self::default()
    }

    /// The schema (PostgreSQL) or key prefix (Redis) to use.
    #[must_use]
    pub fn namespace(mut self, name: impl Into<String>) -> Self {
        self.namespace = Some(name.into());
        self
    }

    /// Whether connecting may create or upgrade the schema.
    #[must_use]
    pub fn migrate(mut self, yes: bool) -> Self {
        self.migrate = yes;
        self
    }

    /// The namespace a connection to `url` with these options uses, as
    /// `("schema", name)` (PostgreSQL) or `("prefix", name)` (Redis): the
    /// one set here, else the URL's, else the default. `None` for memory,
    /// SQLite and a URL that does not parse.
    pub fn namespace_in(&self, url: &str) -> Option<(&'static str, String)> {
        let (key, url) = match BackendUrl::parse(url).ok()? {
            BackendUrl::Redis(url) => ("prefix", url),
            BackendUrl::Postgres(url) => ("schema", url),
            BackendUrl::Memory | BackendUrl::Sqlite(_) => return None,
        };
        let (_, name) = self.split_namespace(&url, key);
        Some((key, name.unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())))
    }

    /// `url` without its `?{key}=` parameter, and the namespace to use:
    /// the one set here, else that parameter's.
    fn split_namespace(&self, url: &str, key: &str) -> (String, Option<String>) {
        let (url, in_url) = take_namespace(url, key);
        (url, self.namespace.clone().or(in_url))
    }
}

/// The schema and the key prefix when neither the options nor the URL name
/// one (`PgOptions::DEFAULT_SCHEMA`, `RedisOptions::DEFAULT_PREFIX`; a test
/// keeps them equal).
const DEFAULT_NAMESPACE: &str = "leaseq";

/// Splits `?schema=` / `?prefix=` (the namespace) off a server URL; other
/// query parameters (e.g. `sslmode`) stay.
fn take_namespace(url: &str, key: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut found = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|kv| match kv.split_once('=') {
            Some((k, v)) if k == key => {
                found = Some(v.to_string());
                false
            }
            _ => !kv.is_empty(),
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, found)
}

/// Connects to the backend `url` names and checks that it answers. On
/// PostgreSQL it also creates or upgrades the schema (migrations): a role
/// without `CREATE` uses [`connect_with`] and `migrate(false)`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leaseq::ConnectError> {
/// let backend = leaseq::connect("memory://").await?;
/// assert!(!backend.capabilities().durable);
/// assert!(leaseq::connect("nosuch://x").await.is_err());
/// # Ok(())
/// # }
/// ```
pub async fn connect(url: &str) -> Result<Arc<dyn Backend>, ConnectError> {
    connect_with(url, &ConnectOptions::default()).await
}

/// [`connect`] with [`ConnectOptions`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leaseq::ConnectError> {
/// use leaseq::ConnectOptions;
/// let options = ConnectOptions::new().namespace("billing").migrate(false);
/// let backend = leaseq::connect_with("memory://", &options).await?;
/// assert!(backend.groups().test_hooks.is_none());
/// # Ok(())
/// # }
/// ```
pub async fn connect_with(
    url: &str,
    options: &ConnectOptions,
) -> Result<Arc<dyn Backend>, ConnectError> {
    let parsed = BackendUrl::parse(url)?;
    let kind = parsed.kind();
    let backend = open(parsed, options).await?;
    backend
        .now()
        .await
        .map_err(|source| ConnectError::Unreachable {
            backend: kind,
            source,
        })?;
    Ok(backend)
}

async fn open(url: BackendUrl, options: &ConnectOptions) -> Result<Arc<dyn Backend>, ConnectError> {
    match url {
        BackendUrl::Memory => open_memory(),
        BackendUrl::Redis(url) => {
            let (url, prefix) = options.split_namespace(&url, "prefix");
            open_redis(&url, prefix).await
        }
        BackendUrl::Postgres(url) => {
            let (url, schema) = options.split_namespace(&url, "schema");
            open_postgres(&url, schema, options.migrate).await
        }
        BackendUrl::Sqlite(url) => open_sqlite(&url, options.migrate).await,
    }
}

/// A setup error: bad input in the URL, or the server out of reach.
#[allow(dead_code)]
fn setup_error(backend: &'static str, url: &str, e: leaseq_core::Error) -> ConnectError {
    match e {
        leaseq_core::Error::InvalidInput { what } => ConnectError::BadUrl {
            url: leaseq_core::redact_url(url),
            why: what,
        },
        source => ConnectError::Unreachable { backend, source },
    }
}

#[cfg(feature = "memory")]
fn open_memory() -> Result<Arc<dyn Backend>, ConnectError> {
    Ok(Arc::new(leaseq_memory::MemoryBackend::new()))
}

#[cfg(not(feature = "memory"))]
fn open_memory() -> Result<Arc<dyn Backend>, ConnectError> {
    Err(ConnectError::NotCompiled {
        backend: "memory",
        feature: "memory",
    })
}

#[cfg(any(feature = "redis", feature = "fred"))]
fn redis_config(url: &str, prefix: Option<String>) -> leaseq_redis::RedisOptions {
    let config = leaseq_redis::RedisOptions::new(url);
    match prefix {
        Some(p) => config.prefix(p),
        None => config,
    }
}

#[cfg(feature = "redis")]
async fn open_redis(url: &str, prefix: Option<String>) -> Result<Arc<dyn Backend>, ConnectError> {
    let config = redis_config(url, prefix);
    leaseq_redis::RedisRsBackend::connect(config)
        .await
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| setup_error("redis", url, e))
}

#[cfg(all(feature = "fred", not(feature = "redis")))]
async fn open_redis(url: &str, prefix: Option<String>) -> Result<Arc<dyn Backend>, ConnectError> {
    let config = redis_config(url, prefix);
    leaseq_redis::FredBackend::connect(config)
        .await
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| setup_error("redis", url, e))
}

#[cfg(not(any(feature = "redis", feature = "fred")))]
async fn open_redis(_url: &str, _prefix: Option<String>) -> Result<Arc<dyn Backend>, ConnectError> {
    Err(ConnectError::NotCompiled {
        backend: "redis",
        feature: "redis",
    })
}

#[cfg(feature = "postgres")]
async fn open_postgres(
    url: &str,
    schema: Option<String>,
    migrate: bool,
) -> Result<Arc<dyn Backend>, ConnectError> {
    let mut options = leaseq_postgres::PgOptions::new()
        .acquire_timeout(std::time::Duration::from_secs(5))
        .migrate_on_connect(migrate);
    if let Some(schema) = schema {
        options = options.schema(schema);
    }
    leaseq_postgres::PgBackend::connect(url, options)
        .await
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| setup_error("postgres", url, e))
}

#[cfg(not(feature = "postgres"))]
async fn open_postgres(
    _url: &str,
    _schema: Option<String>,
    _migrate: bool,
) -> Result<Arc<dyn Backend>, ConnectError> {
    Err(ConnectError::NotCompiled {
        backend: "postgres",
        feature: "postgres",
    })
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &str, migrate: bool) -> Result<Arc<dyn Backend>, ConnectError> {
    let options = leaseq_sqlite::SqliteOptions::new().migrate_on_connect(migrate);
    leaseq_sqlite::SqliteBackend::connect(url, options)
        .await
        .map(|b| Arc::new(b) as Arc<dyn Backend>)
        .map_err(|e| setup_error("sqlite", url, e))
}

#[cfg(not(feature = "sqlite"))]
async fn open_sqlite(_url: &str, _migrate: bool) -> Result<Arc<dyn Backend>, ConnectError> {
    Err(ConnectError::NotCompiled {
        backend: "sqlite",
        feature: "sqlite",
    })
}

#[cfg(test)]
mod tests {
    use super::{take_namespace, BackendUrl, ConnectError};

    #[test]
    fn connect_errors_never_show_a_password() {
        let e = BackendUrl::parse("nosuch://app:planted-pw@h:1").unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("nosuch://app:***@h:1"), "{shown}");
        assert!(!shown.contains("planted-pw"), "{shown}");
        // A backend error that quotes the URL is masked too.
        let e = ConnectError::Unreachable {
            backend: "redis",
            source: leaseq_core::Error::unavailable(
                "connecting to redis://app:planted-pw@h:1",
                std::io::Error::other("refused by redis://:planted-pw@h:1"),
            ),
        };
        let shown = e.to_string();
        assert!(!shown.contains("planted-pw"), "{shown}");
        assert!(shown.contains("redis://app:***@h:1"), "{shown}");
        // `main` returning it prints Debug: the same masked message.
        assert_eq!(format!("{e:?}"), shown);
        let e = ConnectError::NotCompiled {
            backend: "redis",
            feature: "redis",
        };
        let shown = format!("{e:?}");
        assert!(shown.contains("--features redis"), "{shown}");
    }

    #[test]
    fn sqlite_urls_are_recognised_with_and_without_slashes() {
        for url in [
            "sqlite::memory:",
            "sqlite://jobs.db",
            "SQLite:///var/jobs.db",
            "sqlite:x.db",
        ] {
            assert_eq!(
                BackendUrl::parse(url).map(|u| u.kind()).ok(),
                Some("sqlite"),
                "{url}"
            );
        }
        assert!(BackendUrl::parse("sqlite").is_err());
    }

    #[test]
    fn the_namespace_in_use_is_the_options_then_the_urls_then_the_default() {
        use super::ConnectOptions;
        let given = ConnectOptions::new().namespace("mine");
        let none = ConnectOptions::new();
        let pg = "postgres://u@h/db?schema=app&sslmode=require";
        assert_eq!(given.namespace_in(pg), Some(("schema", "mine".into())));
        assert_eq!(none.namespace_in(pg), Some(("schema", "app".into())));
        assert_eq!(
            none.namespace_in("redis://h:6379"),
            Some(("prefix", super::DEFAULT_NAMESPACE.into()))
        );
        assert_eq!(none.namespace_in("sqlite:///tmp/x.db"), None);
        assert_eq!(none.namespace_in("memory://"), None);
        #[cfg(feature = "postgres")]
        assert_eq!(
            super::DEFAULT_NAMESPACE,
            leaseq_postgres::PgOptions::DEFAULT_SCHEMA
        );
        #[cfg(feature = "redis")]
        assert_eq!(
            super::DEFAULT_NAMESPACE,
            leaseq_redis::RedisOptions::DEFAULT_PREFIX
        );
    }

    #[test]
    fn the_namespace_comes_off_the_url_and_the_rest_stays() {
        assert_eq!(
            take_namespace("postgres://u@h/db?schema=app&sslmode=require", "schema"),
            (
                "postgres://u@h/db?sslmode=require".to_string(),
                Some("app".to_string())
            )
        );
        assert_eq!(
            take_namespace("redis://h:6379?prefix=jobs", "prefix"),
            ("redis://h:6379".to_string(), Some("jobs".to_string()))
        );
        assert_eq!(
            take_namespace("redis://h:6379", "prefix"),
            ("redis://h:6379".to_string(), None)
        );
    }
}

#[cfg(test)]
mod error_tests {
    use super::*;

    #[derive(Debug)]
    struct Cause;

    impl fmt::Display for Cause {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("connection refused to redis://user:hunter2@db:6379")
        }
    }

    impl std::error::Error for Cause {}

    /// What an error reporter prints: the message, then every source.
    fn reported(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            text.push_str(" / caused by: ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    }

    #[test]
    fn a_reporter_prints_the_cause_once_and_masked() {
        let e = ConnectError::Unreachable {
            backend: "redis",
            source: leaseq_core::Error::unavailable("redis connect", Cause),
        };
        let text = reported(&e);
        assert_eq!(text.matches("connection refused").count(), 1, "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
