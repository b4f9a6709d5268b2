//! Writing batches: plain batches in one statement, batches with dedup keys
//! (or too big for one statement) in one `BEGIN IMMEDIATE` transaction.

use std::collections::HashMap;

use leaseq_core::limits::check_batch;
use leaseq_core::{Enqueued, Error, LeaseToken, NewItem, QueueName, Result};
use sqlx::SqliteConnection;

use crate::rows::{col, db, item_id, millis};
use crate::sql;
use crate::SqliteBackend;

/// Where an item of a batch ends up.
enum Slot {
    /// Already held by this id (a dedup key held by an unfinished item).
    Held(i64),
    /// The same key as the batch's item at this index, which wins.
    SameAs(usize),
    /// Inserted: the index among the rows this batch inserts.
    New(usize),
}

impl SqliteBackend {
    /// [`check_batch`] against this backend's bounds (a NUL in a dedup
    /// key among them: no store is asked to keep one).
    pub(crate) fn check_items(&self, items: &[NewItem]) -> Result<()> {
        check_batch(items, &self.inner.options.limits)
    }

    /// Whether writing `items` needs a transaction: dedup keys must be
    /// looked up and inserted under one lock, and a batch of several
    /// statements must be written whole.
    pub(crate) fn needs_transaction(items: &[NewItem]) -> bool {
        items.len() > sql::INSERT_CHUNK || items.iter().any(|i| i.dedup_key.is_some())
    }

    /// Enqueues a checked batch on `conn`: in a transaction when
    /// [`SqliteBackend::needs_transaction`] says so, otherwise one statement.
    pub(crate) async fn enqueue_on(
        &self,
        conn: &mut SqliteConnection,
        queue: &QueueName,
        items: &[NewItem],
    ) -> Result<Vec<Enqueued>> {
        let keys: Vec<&str> = {
            let mut seen = std::collections::HashSet::new();
            items
                .iter()
                .filter_map(|i| i.dedup_key.as_deref())
                .filter(|k| seen.insert(*k))
                .collect()
        };
        let holders = self.holders(conn, queue, &keys).await?;
        // The first item with a key wins within the batch.
        let mut first: HashMap<&str, usize> = HashMap::new();
        let mut fresh: Vec<&NewItem> = Vec::new();
        let mut slots = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let slot = match item.dedup_key.as_deref() {
                Some(k) => match (holders.get(k), first.get(k)) {
                    (Some(id), _) => Slot::Held(*id),
                    (None, Some(j)) => Slot::SameAs(*j),
                    (None, None) => {
                        first.insert(k, i);
                        fresh.push(item);
                        Slot::New(fresh.len() - 1)
                    }
                },
                None => {
                    fresh.push(item);
                    Slot::New(fresh.len() - 1)
                }
            };
            slots.push(slot);
        }
        let mut ids = Vec::with_capacity(fresh.len());
        for chunk in fresh.chunks(sql::INSERT_CHUNK) {
            ids.extend(self.insert(conn, queue, chunk).await?);
        }
        let mut out: Vec<Enqueued> = Vec::with_capacity(items.len());
        for slot in slots {
            let e = match slot {
                Slot::Held(id) => Enqueued {
                    id: item_id(id)?,
                    deduplicated: true,
                },
                Slot::SameAs(j) => Enqueued {
                    id: out.get(j).map(|e| e.id).ok_or_else(|| Error::Corrupt {
                        what: "a dedup key's first item came later in the batch".into(),
                    })?,
                    deduplicated: true,
                },
                Slot::New(k) => Enqueued {
                    id: item_id(*ids.get(k).ok_or_else(|| Error::Corrupt {
                        what: format!("enqueue inserted {} rows, expected more", ids.len()),
                    })?)?,
                    deduplicated: false,
                },
            };
            out.push(e);
        }
        Ok(out)
    }

    /// The ids holding `keys` in `queue`.
    async fn holders(
        &self,
        conn: &mut SqliteConnection,
        queue: &QueueName,
        keys: &[&str],
    ) -> Result<HashMap<String, i64>> {
        let mut holders = HashMap::new();
        for chunk in keys.chunks(sql::INSERT_CHUNK) {
            let text = sql::dedup_holders(chunk.len());
            let mut q = sqlx::query(&text).bind(queue.as_str());
            for k in chunk {
                q = q.bind(*k);
            }
            self.count([queue]);
            for row in q
                .fetch_all(&mut *conn)
                .await
                .map_err(db("enqueue: looking up dedup keys"))?
            {
                holders.insert(col::<String>(&row, 0)?, col::<i64>(&row, 1)?);
            }
        }
        Ok(holders)
    }

    /// Inserts `items` in one statement; returns their ids in batch order.
    async fn insert(
        &self,
        conn: &mut SqliteConnection,
        queue: &QueueName,
        items: &[&NewItem],
    ) -> Result<Vec<i64>> {
        use std::fmt::Write as _;
        let mut fields = String::with_capacity(items.len() * 24);
        let mut payloads = Vec::with_capacity(items.iter().map(|i| i.payload.len()).sum());
        fields.push('[');
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                fields.push(',');
            }
            let payload = &item.payload;
            let _ = write!(
                fields,
                "[{},{},{},",
                item.priority,
                item.max_attempts,
                millis(item.delay)
            );
            match item.dedup_key.as_deref() {
                Some(key) => sql::json_string(key, &mut fields),
                None => fields.push_str("null"),
            }
            let _ = write!(fields, ",{},{},", payloads.len() + 1, payload.len());
            match item.unique_for {
                Some(hold) => {
                    let _ = write!(fields, "{}]", millis(hold));
                }
                None => fields.push_str("null]"),
            }
            payloads.extend_from_slice(payload);
        }
        fields.push(']');
        self.count([queue]);
        let done = sqlx::query(sql::INSERT)
            .bind(queue.as_str())
            .bind(fields)
            .bind(payloads)
            .execute(&mut *conn)
            .await
            .map_err(db("enqueue"))?;
        let n = i64::try_from(items.len()).unwrap_or(i64::MAX);
        if done.rows_affected() != u64::try_from(n).unwrap_or(u64::MAX) {
            return Err(Error::Corrupt {
                what: format!(
                    "enqueue of {} items inserted {} rows",
                    items.len(),
                    done.rows_affected()
                ),
            });
        }
        // One statement under the write lock, rows in batch order: the
        // AUTOINCREMENT ids are consecutive, ending at the last one.
        let last = done.last_insert_rowid();
        if items.iter().any(|i| i.delay.is_zero()) {
            self.inner.wakeups.wake(queue.as_str());
        }
        Ok((last - n + 1..=last).collect())
    }

    /// The body of `enqueue_once` inside its transaction: the stored
    /// results of `request`, or the batch written now and its results
    /// stored.
    pub(crate) async fn enqueue_once_in(
        &self,
        tx: &mut SqliteConnection,
        queue: &QueueName,
        request: LeaseToken,
        items: &[NewItem],
    ) -> Result<Recalled> {
        let req = crate::rows::sql_token(request);
        self.count([queue]);
        let stored = sqlx::query(sql::REQUEST_GET)
            .bind(queue.as_str())
            .bind(&req)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db("enqueue_once: looking up the request"))?;
        if let Some(row) = stored {
            let results = parse_results(&col::<String>(&row, 0)?)?;
            if results.len() != items.len() {
                return Err(Error::invalid(format!(
                    "request {request} was first sent with {} items, now with {}",
                    results.len(),
                    items.len()
                )));
            }
            return Ok(Recalled::Before(results));
        }
        let results = if items.is_empty() {
            Vec::new()
        } else {
            self.enqueue_on(tx, queue, items).await?
        };
        self.count([queue]);
        sqlx::query(sql::REQUEST_PUT)
            .bind(queue.as_str())
            .bind(&req)
            .bind(format_results(&results))
            .bind(millis(leaseq_core::limits::REQUEST_MEMORY))
            .execute(&mut *tx)
            .await
            .map_err(db("enqueue_once: storing the results"))?;
        Ok(Recalled::Now(results))
    }
}

/// What `enqueue_once` found under its request.
pub(crate) enum Recalled {
    /// The results stored by an earlier call: nothing was written.
    Before(Vec<Enqueued>),
    /// The results of the batch this call wrote.
    Now(Vec<Enqueued>),
}

/// Results as stored: ids in batch order, `d` after a deduplicated one.
fn format_results(results: &[Enqueued]) -> String {
    results
        .iter()
        .map(|e| format!("{}{}", e.id, if e.deduplicated { "d" } else { "" }))
        .collect::<Vec<_>>()
        .join(",")
}

/// The inverse of [`format_results`].
fn parse_results(text: &str) -> Result<Vec<Enqueued>> {
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|part| {
            let (digits, deduplicated) = match part.strip_suffix('d') {
                Some(d) => (d, true),
                None => (part, false),
            };
            let id = digits.parse::<u64>().map_err(|_| Error::Corrupt {
                what: format!("stored request results {text:?}"),
            })?;
            Ok(Enqueued {
                id: leaseq_core::ItemId::new(id),
                deduplicated,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_results_round_trip() {
        let results = vec![
            Enqueued {
                id: leaseq_core::ItemId::new(7),
                deduplicated: false,
            },
            Enqueued {
                id: leaseq_core::ItemId::new(3),
                deduplicated: true,
            },
        ];
        let text = format_results(&results);
        assert_eq!(text, "7,3d");
        let back = parse_results(&text).map_err(|e| e.to_string());
        assert_eq!(back.map(|r| r.len()), Ok(2));
        assert!(parse_results("").is_ok_and(|r| r.is_empty()));
        assert!(parse_results("x,1").is_err());
    }
}
