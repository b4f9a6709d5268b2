//! Bare SQL on PostgreSQL: an `UNNEST` insert, a `FOR UPDATE SKIP LOCKED`
//! claim update, and deletes, on a table with nothing but an id, a payload
//! and a lease column.

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::future::try_join_all;
use leaseq_core::{Error, Result};
use sqlx::postgres::{PgPool, PgPoolOptions};

use super::Baseline;

/// How the bare baseline finishes the rows it claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStyle {
    /// One `DELETE … WHERE id = $1` per row, run concurrently on the pool:
    /// the same shape as the backend's one ack per lease.
    PerRow,
    /// One `DELETE … WHERE id = ANY($1)` per batch: the floor no per-item
    /// ack can reach.
    Batched,
}

/// The bare statements on their own table, in a schema of their own.
#[derive(Debug, Clone)]
pub struct PgRaw {
    pool: PgPool,
    table: String,
    ack: AckStyle,
}

fn err(what: &str) -> impl FnOnce(sqlx::Error) -> Error + '_ {
    move |e| Error::outcome_unknown(what.to_owned(), e)
}

impl PgRaw {
    /// Connects a pool of `connections` to `url` and (re)creates the table
    /// `schema.raw_jobs`.
    pub async fn connect(url: &str, schema: &str, connections: u32) -> Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(connections)
            .connect(url)
            .await
            .map_err(err("connecting"))?;
        let table = format!("\"{schema}\".raw_jobs");
        for stmt in [
            format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""),
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (id bigserial PRIMARY KEY, queue text NOT NULL, \
                 payload bytea NOT NULL, leased_until timestamptz)"
            ),
            format!(
                "CREATE INDEX IF NOT EXISTS raw_jobs_ready ON {table} (queue, id) WHERE leased_until IS NULL"
            ),
        ] {
            sqlx::query(&stmt).execute(&pool).await.map_err(err("creating the table"))?;
        }
        Ok(PgRaw {
            pool,
            table,
            ack: AckStyle::PerRow,
        })
    }

    /// The same store, finishing rows in the given style.
    #[must_use]
    pub fn with_ack(&self, ack: AckStyle) -> Self {
        PgRaw {
            ack,
            ..self.clone()
        }
    }
}

#[async_trait]
impl Baseline for PgRaw {
    fn name(&self) -> &str {
        match self.ack {
            AckStyle::PerRow => "postgres-raw",
            AckStyle::Batched => "postgres-raw-batchdel",
        }
    }

    fn describe(&self) -> &str {
        match self.ack {
            AckStyle::PerRow => {
                "UNNEST insert; UPDATE … (SELECT … LIMIT n FOR UPDATE SKIP LOCKED) RETURNING; \
                 one DELETE by id per row, concurrent on the pool"
            }
            AckStyle::Batched => {
                "UNNEST insert; UPDATE … (SELECT … LIMIT n FOR UPDATE SKIP LOCKED) RETURNING; \
                 one DELETE … WHERE id = ANY($1) per batch"
            }
        }
    }

    fn batch_only(&self) -> bool {
        self.ack == AckStyle::Batched
    }

    async fn push(&self, queue: &str, payloads: &[Bytes]) -> Result<()> {
        let rows: Vec<&[u8]> = payloads.iter().map(|p| p.as_ref()).collect();
        sqlx::query(&format!(
            "INSERT INTO {} (queue, payload) SELECT $1, p FROM unnest($2::bytea[]) AS p",
            self.table
        ))
        .bind(queue)
        .bind(rows)
        .execute(&self.pool)
        .await
        .map_err(err("insert"))?;
        Ok(())
    }

    async fn pop(&self, queue: &str, n: usize) -> Result<usize> {
        let t = &self.table;
        let rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(&format!(
            "UPDATE {t} SET leased_until = now() + interval '60 seconds' WHERE id IN ( \
               SELECT id FROM {t} WHERE queue = $1 AND leased_until IS NULL \
               ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id, payload"
        ))
        .bind(queue)
        .bind(n as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(err("claim"))?;
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        match (self.ack, ids.as_slice()) {
            (_, []) => {}
            (AckStyle::Batched, _) => {
                sqlx::query(&format!("DELETE FROM {t} WHERE id = ANY($1)"))
                    .bind(&ids)
                    .execute(&self.pool)
                    .await
                    .map_err(err("delete"))?;
            }
            (AckStyle::PerRow, _) => {
                let sql = format!("DELETE FROM {t} WHERE id = $1");
                try_join_all(
                    ids.iter()
                        .map(|id| sqlx::query(&sql).bind(*id).execute(&self.pool)),
                )
                .await
                .map_err(err("delete"))?;
            }
        }
        Ok(rows.len())
    }

    async fn clear(&self, queue: &str) -> Result<()> {
        sqlx::query(&format!("DELETE FROM {} WHERE queue = $1", self.table))
            .bind(queue)
            .execute(&self.pool)
            .await
            .map_err(err("clear"))?;
        Ok(())
    }
}
