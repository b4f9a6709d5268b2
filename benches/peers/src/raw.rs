//! The raw servers: what the same work costs with no queue semantics.
//!
//! - Redis: pipelined `LPUSH` batches, consumers `RPOP` (one job or `count`
//!   jobs per command) on one multiplexed connection (the way leaseq's
//!   redis-rs client connects).
//! - PostgreSQL: a plain table, one `INSERT … SELECT unnest($1)` per batch,
//!   consumers each `DELETE … WHERE id = (SELECT id … FOR UPDATE SKIP LOCKED
//!   LIMIT 1) RETURNING`, one row per statement, on a pool of 8.

use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use redis::aio::MultiplexedConnection;
use redis::io::tcp::TcpSettings;
use redis::IntoConnectionInfo;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use crate::common::{enqueue_batches, finish_drain, payload, DrainClock, Rates, Settings};

const REDIS_KEY: &str = "peers:raw";
const PG_SCHEMA: &str = "peers_raw";

/// One multiplexed redis-rs connection, with `TCP_NODELAY` as asked.
pub async fn redis_connect(url: &str, nodelay: bool) -> Result<MultiplexedConnection> {
    let info = url
        .into_connection_info()
        .with_context(|| format!("redis url {url:?}"))?
        .set_tcp_settings(TcpSettings::default().set_nodelay(nodelay));
    let client = redis::Client::open(info)?;
    Ok(client.get_multiplexed_async_connection().await?)
}

/// Redis: pipelined `LPUSH`, then `RPOP key [count]` from every consumer.
pub async fn redis_drain(s: &Settings, count: usize, nodelay: bool) -> Result<Rates> {
    let conn = redis_connect(&s.redis_url, nodelay).await?;
    let _: () = redis::cmd("DEL")
        .arg(REDIS_KEY)
        .query_async(&mut conn.clone())
        .await?;
    let enqueue_secs = {
        let conn = conn.clone();
        enqueue_batches(s.jobs, s.batch, s.producers, move |ids| {
            let mut conn = conn.clone();
            async move {
                let mut pipe = redis::pipe();
                for id in ids {
                    pipe.cmd("LPUSH")
                        .arg(REDIS_KEY)
                        .arg(&payload(id)[..])
                        .ignore();
                }
                let _: () = pipe.query_async(&mut conn).await?;
                Ok(())
            }
        })
        .await?
    };
    let clock = DrainClock::start(s.jobs);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..s.consumers {
        let (mut conn, clock) = (conn.clone(), clock.clone());
        tasks.spawn(async move {
            while !clock.done() {
                let got = if count <= 1 {
                    let one: Option<Vec<u8>> = redis::cmd("RPOP")
                        .arg(REDIS_KEY)
                        .query_async(&mut conn)
                        .await?;
                    u64::from(one.is_some())
                } else {
                    let many: Option<Vec<Vec<u8>>> = redis::cmd("RPOP")
                        .arg(REDIS_KEY)
                        .arg(count)
                        .query_async(&mut conn)
                        .await?;
                    many.map_or(0, |v| v.len() as u64)
                };
                if got == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    clock.add(got);
                }
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    let drain = finish_drain(&clock, tasks, s.timeout).await?;
    let left: u64 = redis::cmd("LLEN")
        .arg(REDIS_KEY)
        .query_async(&mut conn.clone())
        .await?;
    if left != 0 {
        bail!("{left} jobs left in the list after the drain");
    }
    Ok(Rates {
        enqueue: s.jobs as f64 / enqueue_secs,
        drain,
    })
}

/// A pool of `n` connections (sqlx sets `TCP_NODELAY` on its TCP sockets).
pub async fn pg_pool(url: &str, n: u32) -> Result<PgPool> {
    PgPoolOptions::new()
        .max_connections(n)
        .connect(url)
        .await
        .with_context(|| format!("connecting to {url}"))
}

/// `VACUUM (ANALYZE)` of every table in `schemas` (the server runs with
/// autovacuum off; dead tuples of earlier runs would slow later ones),
/// unless `s.vacuum` is off.
pub async fn vacuum_schemas(s: &Settings, pool: &PgPool, schemas: &[&str]) -> Result<()> {
    if !s.vacuum {
        return Ok(());
    }
    let tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT schemaname::text, tablename::text FROM pg_tables WHERE schemaname = ANY($1)",
    )
    .bind(schemas)
    .fetch_all(pool)
    .await?;
    for (schema, table) in tables {
        let sql = format!(
            "VACUUM (ANALYZE) \"{}\".\"{}\"",
            schema.replace('"', "\"\""),
            table.replace('"', "\"\"")
        );
        sqlx::raw_sql(&sql)
            .execute(pool)
            .await
            .with_context(|| sql.clone())?;
    }
    Ok(())
}

/// PostgreSQL: batched `INSERT`, then one-row `SKIP LOCKED` deletes.
pub async fn pg_drain(s: &Settings) -> Result<Rates> {
    let pool = pg_pool(&s.pg_url, s.consumers.max(1) as u32).await?;
    let table = format!("{PG_SCHEMA}.jobs");
    for stmt in [
        format!("CREATE SCHEMA IF NOT EXISTS {PG_SCHEMA}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (id bigserial PRIMARY KEY, payload bytea NOT NULL)"
        ),
        format!("DELETE FROM {table}"),
    ] {
        sqlx::raw_sql(&stmt).execute(&pool).await?;
    }
    vacuum_schemas(s, &pool, &[PG_SCHEMA]).await?;
    let insert = format!("INSERT INTO {table} (payload) SELECT p FROM unnest($1::bytea[]) AS p");
    let enqueue_secs = {
        let pool = pool.clone();
        enqueue_batches(s.jobs, s.batch, s.producers, move |ids| {
            let (pool, insert) = (pool.clone(), insert.clone());
            async move {
                let rows: Vec<Vec<u8>> = ids.into_iter().map(|id| payload(id).to_vec()).collect();
                sqlx::query(&insert).bind(rows).execute(&pool).await?;
                Ok(())
            }
        })
        .await?
    };
    let claim = format!(
        "DELETE FROM {table} WHERE id = (SELECT id FROM {table} ORDER BY id \
         FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id, payload"
    );
    let clock = DrainClock::start(s.jobs);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..s.consumers {
        let (pool, claim, clock) = (pool.clone(), claim.clone(), clock.clone());
        tasks.spawn(async move {
            while !clock.done() {
                let row: Option<(i64, Vec<u8>)> =
                    sqlx::query_as(&claim).fetch_optional(&pool).await?;
                match row {
                    Some(_) => clock.add(1),
                    None => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    let drain = finish_drain(&clock, tasks, s.timeout).await?;
    let (left,): (i64,) = sqlx::query_as(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(&pool)
        .await?;
    if left != 0 {
        bail!("{left} rows left after the drain");
    }
    pool.close().await;
    Ok(Rates {
        enqueue: s.jobs as f64 / enqueue_secs,
        drain,
    })
}
