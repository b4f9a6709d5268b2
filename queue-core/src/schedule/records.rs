//! A schedule as a SQL store keeps it (text, bytes and signed numbers):
//! the raw record goes in, the contract's value or next step comes out, so
//! the decoding, the fire rule and their error texts live here once for
//! every backend that keeps schedules as rows.

use bytes::Bytes;

use crate::schedule::{Fired, ScheduleName, ScheduleTick, StoredSchedule};
use crate::stored::timestamp;
use crate::{Enqueued, Error, QueueName, Result};

/// A schedule's row, raw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    /// The name, as stored.
    pub name: String,
    /// The queue, as stored.
    pub queue: String,
    /// [`crate::schedule::Schedule::spec`].
    pub spec: String,
    /// The payload.
    pub payload: Vec<u8>,
    /// The revision.
    pub revision: i64,
    /// When the revision was stored, epoch milliseconds.
    pub defined_at_ms: i64,
    /// The last fired tick, epoch milliseconds.
    pub last_tick_ms: Option<i64>,
}

impl TryFrom<ScheduleRecord> for StoredSchedule {
    type Error = Error;

    /// # Errors
    /// [`Error::Corrupt`] for a name, queue or revision no call can write.
    fn try_from(r: ScheduleRecord) -> Result<StoredSchedule> {
        let corrupt = |what: String| Error::Corrupt { what };
        let name = ScheduleName::new(&r.name)
            .map_err(|e| corrupt(format!("a schedule is named {:?}: {e}", r.name)))?;
        let queue = QueueName::new(&r.queue)
            .map_err(|e| corrupt(format!("schedule {name} names queue {:?}: {e}", r.queue)))?;
        let revision = u64::try_from(r.revision)
            .map_err(|_| corrupt(format!("schedule {name} has revision {}", r.revision)))?;
        Ok(StoredSchedule {
            name,
            queue,
            spec: r.spec,
            payload: Bytes::from(r.payload),
            revision,
            defined_at: timestamp(r.defined_at_ms),
            last_tick: r.last_tick_ms.map(timestamp),
        })
    }
}

/// A schedule's record as a SQL store keeps it, read (and locked) inside
/// the fire's transaction together with the store's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickRecord {
    /// The queue the schedule enqueues on, as stored.
    pub queue: String,
    /// The stored revision.
    pub revision: i64,
    /// The last fired tick, epoch milliseconds.
    pub last_tick_ms: Option<i64>,
    /// The store's now, epoch milliseconds.
    pub now_ms: i64,
}

/// What a fire does after reading the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FireStep {
    /// Return this answer and write nothing.
    Answer(Fired),
    /// Enqueue the tick's item on `queue`, record `tick_ms` as the last
    /// tick, then commit; the answer is [`Fired::from_enqueued`].
    Enqueue {
        /// The schedule's queue.
        queue: QueueName,
        /// The tick, as the record keeps it.
        tick_ms: i64,
    },
}

impl ScheduleTick {
    /// The next step of a fire, from the schedule's `record` (`None` when
    /// the schedule is gone): [`ScheduleTick::refusal`]'s answer, or the
    /// queue to enqueue on.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for a tick past what a signed millisecond
    /// count holds; [`Error::Corrupt`] for a stored queue name no call can
    /// write.
    pub fn next_step(&self, record: Option<TickRecord>) -> Result<FireStep> {
        let tick_ms = i64::try_from(self.at.as_millis()).map_err(|_| {
            Error::invalid(format!("tick {} is past the year 292 million", self.at))
        })?;
        let now = record
            .as_ref()
            .map_or(timestamp(0), |r| timestamp(r.now_ms));
        // A negative revision names no revision a caller can hold: stale.
        let stored = record.as_ref().and_then(|r| {
            let revision = u64::try_from(r.revision).ok()?;
            Some((revision, r.last_tick_ms.map(timestamp)))
        });
        if let Some(answer) = self.refusal(stored, now) {
            return Ok(FireStep::Answer(answer));
        }
        // `refusal` answers for a missing record, so one is here.
        let raw = record.map(|r| r.queue).unwrap_or_default();
        let queue = QueueName::new(&raw).map_err(|e| Error::Corrupt {
            what: format!("schedule {} names queue {raw:?}: {e}", self.name),
        })?;
        Ok(FireStep::Enqueue { queue, tick_ms })
    }
}

impl Fired {
    /// The answer of a fire whose one-item enqueue returned `out`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the enqueue returned no result.
    pub fn from_enqueued(out: Vec<Enqueued>) -> Result<Fired> {
        out.into_iter()
            .next()
            .map(Fired::Enqueued)
            .ok_or_else(|| Error::Corrupt {
                what: "an enqueue of one item returned no result".into(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::ScheduleName;
    use crate::{ItemId, Timestamp};

    fn tick(revision: u64, at: u64) -> ScheduleTick {
        ScheduleTick {
            name: ScheduleName::new("nightly").expect("name"),
            revision,
            at: Timestamp::from_millis(at),
        }
    }

    fn record(revision: i64, last: Option<i64>, now: i64) -> TickRecord {
        TickRecord {
            queue: "reports".into(),
            revision,
            last_tick_ms: last,
            now_ms: now,
        }
    }

    #[test]
    fn each_record_gets_the_contracts_answer() {
        let t = tick(3, 1_000);
        let step = |r: Option<TickRecord>| t.next_step(r).expect("a step");
        assert_eq!(step(None), FireStep::Answer(Fired::Stale));
        assert_eq!(
            step(Some(record(4, None, 2_000))),
            FireStep::Answer(Fired::Stale)
        );
        let last_tick = Timestamp::from_millis(1_000);
        assert_eq!(
            step(Some(record(3, Some(1_000), 2_000))),
            FireStep::Answer(Fired::AlreadyFired { last_tick })
        );
        let now = Timestamp::from_millis(900);
        assert_eq!(
            step(Some(record(3, Some(500), 900))),
            FireStep::Answer(Fired::NotDue { now })
        );
        let queue = QueueName::new("reports").expect("queue");
        assert_eq!(
            step(Some(record(3, Some(500), 2_000))),
            FireStep::Enqueue {
                queue,
                tick_ms: 1_000
            }
        );
    }

    #[test]
    fn a_negative_revision_is_stale_and_a_bad_queue_is_corrupt() {
        let t = tick(3, 1_000);
        assert_eq!(
            t.next_step(Some(record(-1, None, 2_000))).expect("a step"),
            (FireStep::Answer(Fired::Stale))
        );
        let mut bad = record(3, None, 2_000);
        bad.queue = String::new();
        assert!(matches!(t.next_step(Some(bad)), Err(Error::Corrupt { .. })));
    }

    #[test]
    fn a_tick_past_signed_milliseconds_is_refused() {
        let t = tick(3, u64::MAX);
        assert!(matches!(t.next_step(None), Err(Error::InvalidInput { .. })));
    }

    #[test]
    fn a_schedule_row_decodes_or_is_corrupt() {
        let row = ScheduleRecord {
            name: "nightly".into(),
            queue: "reports".into(),
            spec: "every 60s".into(),
            payload: b"go".to_vec(),
            revision: 2,
            defined_at_ms: 1_000,
            last_tick_ms: Some(2_000),
        };
        let s = StoredSchedule::try_from(row.clone()).expect("decodes");
        assert_eq!((s.name.as_str(), s.queue.as_str()), ("nightly", "reports"));
        assert_eq!((s.revision, s.payload.as_ref()), (2, &b"go"[..]));
        assert_eq!(s.defined_at, Timestamp::from_millis(1_000));
        assert_eq!(s.last_tick, Some(Timestamp::from_millis(2_000)));
        for bad in [
            ScheduleRecord {
                revision: -1,
                ..row.clone()
            },
            ScheduleRecord {
                queue: String::new(),
                ..row.clone()
            },
            ScheduleRecord {
                name: String::new(),
                ..row
            },
        ] {
            assert!(matches!(
                StoredSchedule::try_from(bad),
                Err(Error::Corrupt { .. })
            ));
        }
    }

    #[test]
    fn an_empty_enqueue_is_corrupt() {
        assert!(matches!(
            Fired::from_enqueued(vec![]),
            Err(Error::Corrupt { .. })
        ));
        let e = Enqueued {
            id: ItemId::new(7),
            deduplicated: false,
        };
        assert_eq!(
            Fired::from_enqueued(vec![e]).expect("one"),
            Fired::Enqueued(e)
        );
    }
}
