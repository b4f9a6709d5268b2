//! The Events group: each change to a job is reported once, with its data,
//! in order per job, and nothing is reported for what changes nothing; a
//! subscriber that falls behind is told with `Lagged`, keeps the newest
//! events within the bound, and goes on.
//!
//! For backends that offer [`leaseq_core::Events`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use leaseq_core::events::{EventKind, EventStream, JobEvent, EVENT_BUFFER, MAX_EVENT_RESULT};
use leaseq_core::{BackendExt, Bytes, Error, ItemId, Lease, NewItem, Released};

use crate::cx::{run, Cx, Needs, LONG, SHORT};
use crate::groupwise::Groupwise as _;
use crate::outcome::{ensure, OrFail};
use crate::{BackendFactory, CheckResult, Rule, Violation};

const RULE: Rule = Rule::Contract("Events");

/// How long a check waits for one event it expects before it calls it
/// lost: generous, since events may cross a server.
const EVENT_WAIT: Duration = Duration::from_secs(10);

/// How long a stream that holds no more events is given to show one, once
/// a stream beside it has seen them all.
const HELD_WAIT: Duration = Duration::from_secs(1);

async fn subscribe(cx: &Cx) -> Result<EventStream, Violation> {
    let events = cx.b.events().or_fail(RULE, "events")?;
    events.subscribe(&cx.q).await.or_fail(RULE, "subscribe")
}

/// The next event, `None` when none came within `wait`; a lag or the end of
/// the stream fails the check.
async fn next(
    cx: &Cx,
    stream: &mut EventStream,
    wait: Duration,
) -> Result<Option<JobEvent>, Violation> {
    match tokio::time::timeout(wait, stream.next()).await {
        Err(_) => Ok(None),
        Ok(Some(Ok(event))) => Ok(Some(event)),
        Ok(Some(Err(e))) => Err(cx.fail(format!("the event stream failed: {e}"))),
        Ok(None) => Err(cx.fail("the event stream ended while the backend was open")),
    }
}

/// The kind, with a Failed or Dead reason left out unless `exact`.
fn shape(kind: &EventKind, exact: bool) -> EventKind {
    match kind {
        EventKind::Failed { .. } if !exact => EventKind::failed("*"),
        EventKind::Dead { .. } if !exact => EventKind::dead("*"),
        other => other.clone(),
    }
}

/// Every change to a job is reported, with its data, in order per job:
/// enqueued, started (attempt), progress, completed (with a small result,
/// or marked elided past [`MAX_EVENT_RESULT`]), released, dead (with the
/// reason, after a `fail` and after a release of the last attempt),
/// failed (an expired lease reaped with attempts left), cancelled (at
/// once, and when a cancel-requested lease ends). What changes no job's
/// course reports nothing: an enqueue that deduplicated, and with the
/// Admin group a removal, a redrive of one dead letter, and a purge.
pub async fn events_report_each_change(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "events_report_each_change", RULE, Needs::EVENTS, |cx| async move {
        let groups = cx.b.groups();
        let (control, history) = (groups.control.is_some(), groups.history.is_some());
        let caps = cx.b.capabilities();
        let can_expire = cx.hooks().is_some() || cx.tb.is_manual();
        let mut stream = subscribe(&cx).await?;
        // id -> the kinds it must report, in order; `true`: reasons exact.
        let mut want: BTreeMap<ItemId, (Vec<EventKind>, bool)> = BTreeMap::new();
        let started = |kinds: &[EventKind]| {
            let mut v = vec![EventKind::Enqueued, EventKind::Started { attempt: 1 }];
            v.extend_from_slice(kinds);
            v
        };

        let mut items = vec![NewItem::new("a"), NewItem::new("b"), NewItem::new("c"), NewItem::new("d")];
        if caps.dedup {
            items.push(NewItem::new("e").dedup_key("events-key"));
        }
        items.push(NewItem::new("g").max_attempts(3));
        items.push(NewItem::new("x").max_attempts(1));
        if control {
            items.push(NewItem::new("h"));
        }
        let ids = cx.enqueue(items).await?;
        if caps.dedup {
            let again = cx.b.enqueue(&cx.q, vec![NewItem::new("e2").dedup_key("events-key")]).await.or_fail(RULE, "enqueue")?;
            ensure!(again[0].deduplicated, RULE, "a second enqueue of a held dedup key was not deduplicated");
        }
        let mut leases = cx.claim(ids.len() as u32, LONG).await?;
        ensure!(leases.len() == ids.len(), RULE, "claimed {} of {}", leases.len(), ids.len());
        leases.sort_by_key(Lease::id);
        let by_payload = |p: &str| leases.iter().find(|l| l.payload == p.as_bytes()).cloned();
        let lease = |p: &str| by_payload(p).ok_or_else(|| cx.fail(format!("no lease of item {p:?}")));

        let a = lease("a")?;
        let mut a_kinds = Vec::new();
        if control {
            cx.b.progress(&a.key, Bytes::from_static(b"half")).await.or_fail(RULE, "progress")?;
            a_kinds.push(EventKind::Progress(Bytes::from_static(b"half")));
        }
        if history {
            cx.b.complete(&a.key, Bytes::from_static(b"r")).await.or_fail(RULE, "complete")?;
            a_kinds.push(EventKind::completed(Some(Bytes::from_static(b"r"))));
        } else {
            cx.b.ack(&a.key).await.or_fail(RULE, "ack")?;
            a_kinds.push(EventKind::completed(None));
        }
        want.insert(a.id(), (started(&a_kinds), true));

        let c = lease("c")?;
        cx.b.fail(&c.key, "bad input").await.or_fail(RULE, "fail")?;
        want.insert(c.id(), (started(&[EventKind::dead("bad input")]), true));

        let d = lease("d")?;
        cx.b.ack_many(std::slice::from_ref(&d.key)).await.or_fail(RULE, "ack_many")?;
        want.insert(d.id(), (started(&[EventKind::completed(None)]), true));

        if let Some(e) = by_payload("e") {
            let end = if history {
                let big = Bytes::from(vec![b'x'; MAX_EVENT_RESULT + 1]);
                cx.b.complete(&e.key, big).await.or_fail(RULE, "complete")?;
                EventKind::Completed { result: None, result_elided: true }
            } else {
                cx.b.ack(&e.key).await.or_fail(RULE, "ack")?;
                EventKind::completed(None)
            };
            want.insert(e.id(), (started(&[end]), true));
        }

        if let Some(h) = by_payload("h") {
            cx.b.cancel(&cx.q, h.id()).await.or_fail(RULE, "cancel")?;
            cx.b.ack(&h.key).await.or_fail(RULE, "ack")?;
            want.insert(h.id(), (started(&[EventKind::Cancelled]), true));
            let f = cx.enqueue(vec![NewItem::new("f")]).await?[0];
            cx.b.cancel(&cx.q, f).await.or_fail(RULE, "cancel")?;
            want.insert(f, (vec![EventKind::Enqueued, EventKind::Cancelled], true));
        }

        let b = lease("b")?;
        cx.b.release(&b.key, Duration::ZERO).await.or_fail(RULE, "release")?;
        want.insert(b.id(), (started(&[EventKind::Released]), true));

        // Its last attempt released: dead, with the backend's reason.
        let x = lease("x")?;
        let released = cx.b.release(&x.key, Duration::ZERO).await.or_fail(RULE, "release")?;
        ensure!(released == Released::Dead, RULE, "a release of the last attempt answered {released:?}; expected Dead");
        want.insert(x.id(), (started(&[EventKind::dead("*")]), false));

        let g = lease("g")?;
        if can_expire {
            cx.expire(std::slice::from_ref(&g)).await?;
            let report = cx.reap_all().await?;
            ensure!(report.requeued == 1, RULE, "the reap of one expired lease with attempts left answered {report:?}");
            want.insert(g.id(), (started(&[EventKind::failed("*")]), false));
        } else {
            cx.b.ack(&g.key).await.or_fail(RULE, "ack")?;
            want.insert(g.id(), (started(&[EventKind::completed(None)]), true));
        }

        if cx.b.groups().admin.is_some() {
            // None of these changes a job's course: no event.
            let moved = cx.b.redrive_item(&cx.q, x.id()).await.or_fail(RULE, "redrive_item")?;
            ensure!(moved, RULE, "redrive_item of the dead letter {} answered false", x.id());
            let [r, p] = cx.enqueue(vec![NewItem::new("r"), NewItem::new("p")]).await?[..] else {
                return Err(cx.fail("an enqueue of 2 items answered another count"));
            };
            cx.b.remove_item(&cx.q, r).await.or_fail(RULE, "remove_item")?;
            want.insert(r, (vec![EventKind::Enqueued], true));
            want.insert(p, (vec![EventKind::Enqueued], true));
            cx.b.purge(&cx.q).await.or_fail(RULE, "purge")?;
        }

        // Read until every job reported what it must, then a little more
        // for anything extra. One job's events come in order, so a job
        // whose events so far do not begin what it must report fails at
        // once.
        let mut got: BTreeMap<ItemId, Vec<EventKind>> = BTreeMap::new();
        let complete = |got: &BTreeMap<ItemId, Vec<EventKind>>| {
            want.iter().all(|(id, (kinds, _))| got.get(id).map_or(0, Vec::len) >= kinds.len())
        };
        let mut done = false;
        loop {
            let wait = if done { SHORT } else { EVENT_WAIT };
            let Some(event) = next(&cx, &mut stream, wait).await? else {
                ensure!(
                    done,
                    RULE,
                    "no event came within {EVENT_WAIT:?}; the jobs reported {got:?}, and must report {want:?}"
                );
                break;
            };
            let kinds = got.entry(event.id).or_default();
            kinds.push(event.kind);
            let Some((expected, exact)) = want.get(&event.id) else {
                return Err(cx.fail(format!("job {} reported {kinds:?}; it was never enqueued here", event.id)));
            };
            let seen: Vec<EventKind> = kinds.iter().map(|k| shape(k, *exact)).collect();
            ensure!(
                expected.starts_with(&seen),
                RULE,
                "job {} reported {kinds:?}; expected {expected:?} (one event per change, in order)",
                event.id
            );
            done = done || complete(&got);
        }
        Ok(())
    })
    .await
}

/// A subscriber that reads nothing while more than [`EVENT_BUFFER`]
/// events go by is told so with [`Error::Lagged`], keeps the newest events
/// (at most the bound), and goes on: an enqueue after it reaches it. A
/// subscriber that keeps up, beside it, sees every event.
pub async fn a_slow_subscriber_lags_and_goes_on(factory: &dyn BackendFactory) -> CheckResult {
    run(factory, "a_slow_subscriber_lags_and_goes_on", RULE, Needs::EVENTS, |cx| async move {
        let mut slow = subscribe(&cx).await?;
        let mut quick = subscribe(&cx).await?;
        // Enough for a queue spread over up to eight stores to overflow
        // each store's buffer.
        const ROUND: usize = 100;
        let rounds = (EVENT_BUFFER * 8).div_ceil(ROUND) + 1;
        let mut newest = BTreeSet::new();
        for _ in 0..rounds {
            let ids: BTreeSet<ItemId> = cx.push_n(ROUND).await?.into_iter().collect();
            let mut seen = BTreeSet::new();
            while seen.len() < ids.len() {
                let Some(event) = next(&cx, &mut quick, EVENT_WAIT).await? else {
                    return Err(cx.fail(format!(
                        "a subscriber that keeps up saw {} of {} enqueues within {EVENT_WAIT:?}",
                        seen.len(),
                        ids.len()
                    )));
                };
                ensure!(
                    event.kind == EventKind::Enqueued && ids.contains(&event.id),
                    RULE,
                    "a subscriber got {event:?} while only enqueues of {ids:?} happened"
                );
                seen.insert(event.id);
            }
            newest = ids;
        }
        // The keeping-up stream has seen every event, so the slow one holds
        // all it will: read it until it waits.
        let (mut read, mut lags) = (BTreeSet::new(), 0usize);
        loop {
            match tokio::time::timeout(HELD_WAIT, slow.next()).await {
                Err(_) => break,
                Ok(Some(Ok(event))) => {
                    read.insert(event.id);
                    ensure!(
                        read.len() <= EVENT_BUFFER * 8,
                        RULE,
                        "a subscriber that read nothing got {} events afterwards: more than the bound",
                        read.len()
                    );
                }
                Ok(Some(Err(Error::Lagged { missed }))) => {
                    ensure!(missed > 0, RULE, "Lagged reported 0 missed events");
                    lags += 1;
                }
                Ok(Some(Err(e))) => return Err(cx.fail(format!("the slow stream failed with {e}; expected Lagged"))),
                Ok(None) => return Err(cx.fail(format!(
                    "the slow stream ended after {lags} Lagged and {} events; expected it to go on",
                    read.len()
                ))),
            }
        }
        ensure!(
            lags > 0,
            RULE,
            "a subscriber that read nothing while {} events went by was never told it lagged ({} events read)",
            rounds * ROUND,
            read.len()
        );
        let lost: Vec<_> = newest.difference(&read).collect();
        ensure!(
            lost.is_empty(),
            RULE,
            "after Lagged the slow stream lacked {} of the last {ROUND} enqueues (the newest events are \
             the ones kept), the first {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
        let after = cx.push_n(1).await?;
        loop {
            match tokio::time::timeout(EVENT_WAIT, slow.next()).await {
                Ok(Some(Ok(event))) if event.id == after[0] => return Ok(()),
                Ok(Some(Ok(_))) => {}
                other => {
                    return Err(cx.fail(format!(
                        "after Lagged, an enqueue did not reach the slow stream: it answered {other:?}"
                    )))
                }
            }
        }
    })
    .await
}
