//! How much one queue holds in its store, read from the server beside the
//! backend (not through it): the kept finished items and the bytes they
//! and the queue's items take. The steady retention run
//! ([`crate::retention_run`]) samples it.
//!
//! | backend | kept | bytes | also |
//! |---|---|---|---|
//! | Redis | fields of the queue's `done` hash | `MEMORY USAGE … SAMPLES 0` summed over every key of the queue (a `SCAN` of its hash tag) | the key count; the bytes of the kept items (`done`, `done:*`) and of the takeover traces (`taken`, kept [`leaseq_core::limits::FINISH_MEMORY`]); `INFO memory`'s `used_memory` (the whole server) |
//! | PostgreSQL | the queue's rows of `leaseq_finished` | `pg_total_relation_size` (heap, indexes, TOAST) summed over every table of the schema | the bytes, dead tuples and vacuums run (manual and auto) of `leaseq_items` and `leaseq_finished` |
//! | SQLite | the queue's rows of `leaseq_finished` | `page_count × page_size` of the database file | free pages, the WAL file's bytes |
//!
//! PostgreSQL's and SQLite's bytes count the whole schema or file, every
//! queue in it: the run's schema or file should hold its queue only.

use std::collections::BTreeMap;

use async_trait::async_trait;
#[cfg(any(feature = "postgres", feature = "sqlite"))]
use leaseq_core::Error;
use leaseq_core::{QueueName, Result};
use serde::Serialize;

/// One reading of a queue's store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Size {
    /// Kept finished items (Redis: records; SQL: rows).
    pub kept: u64,
    /// Bytes the store takes for the queue (see the module docs).
    pub bytes: u64,
    /// Further readings, by name.
    pub extra: BTreeMap<&'static str, u64>,
}

/// Reads one queue's store.
#[async_trait]
pub trait StoreSize: Send + Sync {
    /// What [`Size::kept`] and [`Size::bytes`] count, in one line.
    fn describe(&self) -> &'static str;

    /// Reads the store now.
    async fn measure(&self) -> Result<Size>;
}

/// The reader for the backend named `backend` (as `leaseq-load` names
/// them) at `url`, its keys under `namespace` (the Redis prefix or the
/// PostgreSQL schema), for `queue`.
pub async fn connect(
    backend: &str,
    url: &str,
    namespace: &str,
    queue: &QueueName,
) -> Result<Box<dyn StoreSize>> {
    let _ = (url, namespace, queue);
    match backend {
        #[cfg(feature = "redis-rs")]
        "redis-rs" | "fred" => Ok(Box::new(
            redis::RedisSize::connect(url, namespace, queue).await?,
        )),
        #[cfg(feature = "postgres")]
        "postgres" => Ok(Box::new(
            postgres::PgSize::connect(url, namespace, queue).await?,
        )),
        #[cfg(feature = "sqlite")]
        "sqlite" => Ok(Box::new(sqlite::SqliteSize::connect(url, queue).await?)),
        other => Err(leaseq_core::Error::unsupported(format!(
            "no store size reader for {other} (Redis needs the redis-rs feature)"
        ))),
    }
}

/// A glob pattern that matches exactly the keys starting with `prefix`
/// (`SCAN … MATCH`): `*?[]\` in it are escaped.
pub fn keys_starting_with(prefix: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('*');
    out
}

/// The value of `field` in an `INFO` reply.
pub fn info_field(info: &str, field: &str) -> Option<u64> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == field).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(any(feature = "postgres", feature = "sqlite"))]
fn sql_err(what: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |e| Error::outcome_unknown(format!("store size: {what}"), e)
}

#[cfg(feature = "redis-rs")]
mod redis {
    use ::redis::aio::MultiplexedConnection;
    use leaseq_redis::keys::KeyLayout;

    use super::*;

    fn err(what: &'static str) -> impl FnOnce(::redis::RedisError) -> leaseq_core::Error {
        move |e| leaseq_core::Error::outcome_unknown(format!("store size: {what}"), e)
    }

    /// Keys a `SCAN` step asks for.
    const SCAN_COUNT: u32 = 1_000;

    pub(super) struct RedisSize {
        conn: MultiplexedConnection,
        pattern: String,
        done: String,
        traces: String,
    }

    impl RedisSize {
        pub(super) async fn connect(url: &str, prefix: &str, queue: &QueueName) -> Result<Self> {
            if url.to_ascii_lowercase().starts_with("redis+cluster") {
                return Err(leaseq_core::Error::unsupported(
                    "the store size reader reads one Redis server, not a Cluster",
                ));
            }
            let keys = KeyLayout::new(prefix, queue)?;
            let conn = ::redis::Client::open(url)
                .map_err(err("redis url"))?
                .get_multiplexed_async_connection()
                .await
                .map_err(err("connecting"))?;
            Ok(RedisSize {
                conn,
                pattern: keys_starting_with(&keys.key_prefix()),
                done: keys.done(),
                traces: keys.taken(),
            })
        }
    }

    #[async_trait]
    impl StoreSize for RedisSize {
        fn describe(&self) -> &'static str {
            "kept: records in the queue's done hash; bytes: MEMORY USAGE (SAMPLES 0) \
             summed over the queue's keys"
        }

        async fn measure(&self) -> Result<Size> {
            let mut conn = self.conn.clone();
            let mut keys = Vec::new();
            let mut cursor = 0u64;
            loop {
                let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&self.pattern)
                    .arg("COUNT")
                    .arg(SCAN_COUNT)
                    .query_async(&mut conn)
                    .await
                    .map_err(err("SCAN"))?;
                keys.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            // SCAN may return a key twice.
            keys.sort_unstable();
            keys.dedup();
            let (mut bytes, mut done, mut traces) = (0, 0, 0);
            for key in &keys {
                let b: Option<u64> = ::redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(key)
                    .arg("SAMPLES")
                    .arg(0)
                    .query_async(&mut conn)
                    .await
                    .map_err(err("MEMORY USAGE"))?;
                let b = b.unwrap_or(0);
                bytes += b;
                if key.starts_with(&self.done) {
                    done += b;
                } else if *key == self.traces {
                    traces += b;
                }
            }
            let kept: u64 = ::redis::cmd("HLEN")
                .arg(&self.done)
                .query_async(&mut conn)
                .await
                .map_err(err("HLEN"))?;
            let info: String = ::redis::cmd("INFO")
                .arg("memory")
                .query_async(&mut conn)
                .await
                .map_err(err("INFO"))?;
            let mut extra = BTreeMap::from([
                ("keys", keys.len() as u64),
                ("done_bytes", done),
                ("traces_bytes", traces),
            ]);
            if let Some(used) = info_field(&info, "used_memory") {
                extra.insert("used_memory", used);
            }
            Ok(Size { kept, bytes, extra })
        }
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use sqlx::postgres::{PgPool, PgPoolOptions};
    use sqlx::Row;

    use super::*;

    pub(super) struct PgSize {
        pool: PgPool,
        schema: String,
        queue: String,
    }

    impl PgSize {
        pub(super) async fn connect(url: &str, schema: &str, queue: &QueueName) -> Result<Self> {
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect(url)
                .await
                .map_err(sql_err("connecting"))?;
            Ok(PgSize {
                pool,
                schema: schema.to_owned(),
                queue: queue.as_str().to_owned(),
            })
        }
    }

    /// Per table of the schema: its bytes, dead tuples, vacuums run.
    const TABLES: &str = "SELECT c.relname::text, pg_total_relation_size(c.oid), \
         coalesce(s.n_dead_tup, 0), coalesce(s.vacuum_count + s.autovacuum_count, 0) \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid \
         WHERE n.nspname = $1 AND c.relkind = 'r'";

    #[async_trait]
    impl StoreSize for PgSize {
        fn describe(&self) -> &'static str {
            "kept: the queue's rows of leaseq_finished; bytes: pg_total_relation_size \
             summed over the schema's tables"
        }

        async fn measure(&self) -> Result<Size> {
            let kept: i64 = sqlx::query_scalar(&format!(
                "SELECT count(*) FROM \"{}\".leaseq_finished WHERE queue = $1",
                self.schema
            ))
            .bind(&self.queue)
            .fetch_one(&self.pool)
            .await
            .map_err(sql_err("counting kept rows"))?;
            let rows = sqlx::query(TABLES)
                .bind(&self.schema)
                .fetch_all(&self.pool)
                .await
                .map_err(sql_err("reading table sizes"))?;
            let mut size = Size {
                kept: kept.max(0) as u64,
                ..Size::default()
            };
            for row in rows {
                let name: String = row.try_get(0).map_err(sql_err("a table's name"))?;
                let n = |i: usize| -> Result<u64> {
                    let v: i64 = row.try_get(i).map_err(sql_err("a table's size"))?;
                    Ok(v.max(0) as u64)
                };
                let (bytes, dead, vacuums) = (n(1)?, n(2)?, n(3)?);
                size.bytes += bytes;
                let (b, d, v) = match name.as_str() {
                    "leaseq_items" => ("items_bytes", "items_dead", "items_vacuums"),
                    "leaseq_finished" => ("finished_bytes", "finished_dead", "finished_vacuums"),
                    _ => continue,
                };
                size.extra.extend([(b, bytes), (d, dead), (v, vacuums)]);
            }
            Ok(size)
        }
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::path::PathBuf;
    use std::str::FromStr;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};

    use super::*;

    pub(super) struct SqliteSize {
        pool: SqlitePool,
        path: PathBuf,
        queue: String,
    }

    impl SqliteSize {
        pub(super) async fn connect(url: &str, queue: &QueueName) -> Result<Self> {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(sql_err("parsing the URL"))?
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(std::time::Duration::from_secs(5));
            let path = options.get_filename().to_owned();
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
                .map_err(sql_err("opening the file"))?;
            Ok(SqliteSize {
                pool,
                path,
                queue: queue.as_str().to_owned(),
            })
        }

        async fn pragma(&self, name: &'static str) -> Result<u64> {
            let v: i64 = sqlx::query_scalar(&format!("PRAGMA {name}"))
                .fetch_one(&self.pool)
                .await
                .map_err(sql_err(name))?;
            Ok(v.max(0) as u64)
        }
    }

    #[async_trait]
    impl StoreSize for SqliteSize {
        fn describe(&self) -> &'static str {
            "kept: the queue's rows of leaseq_finished; bytes: page_count × page_size of the \
             database file"
        }

        async fn measure(&self) -> Result<Size> {
            let kept: i64 =
                sqlx::query_scalar("SELECT count(*) FROM leaseq_finished WHERE queue = ?1")
                    .bind(&self.queue)
                    .fetch_one(&self.pool)
                    .await
                    .map_err(sql_err("counting kept rows"))?;
            let pages = self.pragma("page_count").await?;
            let page = self.pragma("page_size").await?;
            let free = self.pragma("freelist_count").await?;
            let mut wal = self.path.clone().into_os_string();
            wal.push("-wal");
            let wal = std::fs::metadata(&wal).map_or(0, |m| m.len());
            Ok(Size {
                kept: kept.max(0) as u64,
                bytes: pages * page,
                extra: BTreeMap::from([("free_pages", free), ("wal_bytes", wal)]),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_patterns_escape_glob_characters() {
        assert_eq!(keys_starting_with("{p:q}:"), "{p:q}:*");
        assert_eq!(
            keys_starting_with("{p:a*b?[c]\\}:"),
            "{p:a\\*b\\?\\[c\\]\\\\}:*"
        );
    }

    #[test]
    fn info_fields_are_read_by_name() {
        let info = "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n";
        assert_eq!(info_field(info, "used_memory"), Some(1_048_576));
        assert_eq!(info_field(info, "used_memory_human"), None);
        assert_eq!(info_field(info, "maxmemory"), None);
    }
}
