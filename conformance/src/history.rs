//! What every task of a storm saw, in one ordered log, and the checks run
//! over it afterwards: the total-queue verdict plus lease overlap, stale
//! successes and redelivery after ack.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use leaseq_core::{ItemId, LeaseToken, Timestamp};

use crate::{Rule, Violation};

/// How a lease handed to a worker ended, from the worker's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// `ack` returned Ok.
    Acked,
    /// `release` returned Ok (to Ready, Scheduled or Dead).
    Released { dead: bool },
    /// `fail` returned Ok.
    Failed,
    /// The call returned `LeaseLost`.
    Lost,
    /// The worker "crashed": dropped the lease without a word.
    Crashed,
}

/// One claimed lease and how it ended.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(crate) id: ItemId,
    pub(crate) token: LeaseToken,
    pub(crate) attempts: u32,
    pub(crate) granted: Timestamp,
    pub(crate) expires_at: Timestamp,
    /// The backend's now, read just after the claim returned: the lease was
    /// surely granted no later than this.
    pub(crate) seen: Timestamp,
    /// Sequence number taken before the claim call started.
    pub(crate) asked: u64,
    /// Sequence number taken after the claim call returned.
    pub(crate) got: u64,
    /// How it ended, with sequence numbers before and after that call.
    pub(crate) end: Option<(End, u64, u64)>,
}

/// The shared log.
#[derive(Debug, Default)]
pub(crate) struct History {
    seq: AtomicU64,
    claims: Mutex<Vec<Claim>>,
    reaped_dead: AtomicU64,
}

impl History {
    /// The next sequence number: a total order over the events of all tasks.
    pub(crate) fn tick(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    /// Records a claim; returns its index for [`History::ended`].
    pub(crate) fn claimed(&self, c: Claim) -> usize {
        let mut v = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        v.push(c);
        v.len() - 1
    }

    /// Records how claim `i` ended.
    pub(crate) fn ended(&self, i: usize, end: End, before: u64, after: u64) {
        let mut v = self.claims.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = v.get_mut(i) {
            c.end = Some((end, before, after));
        }
    }

    /// Records items a reaper sent Dead.
    pub(crate) fn reaped_dead(&self, n: u64) {
        self.reaped_dead.fetch_add(n, Ordering::SeqCst);
    }

    /// Every claim recorded so far.
    pub(crate) fn claims(&self) -> Vec<Claim> {
        self.claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Checks the log against the items enqueued and the ids found Dead at
    /// the end. Returns the first violation with its evidence.
    pub(crate) fn verify(
        &self,
        enqueued: &BTreeSet<ItemId>,
        dead: &[ItemId],
    ) -> Result<(), Violation> {
        let claims = self.claims();
        let mut by_id: BTreeMap<ItemId, Vec<&Claim>> = BTreeMap::new();
        for c in &claims {
            if !enqueued.contains(&c.id) {
                return Err(Violation::new(
                    Rule::Inv5,
                    format!("claim returned id {} that was never enqueued", c.id),
                ));
            }
            by_id.entry(c.id).or_default().push(c);
        }
        let mut dead_count: BTreeMap<ItemId, usize> = BTreeMap::new();
        for id in dead {
            *dead_count.entry(*id).or_default() += 1;
        }
        if let Some((id, n)) = dead_count.iter().find(|(_, n)| **n > 1) {
            return Err(Violation::new(
                Rule::Inv1,
                format!("item {id} is listed Dead {n} times"),
            ));
        }
        let mut tokens = BTreeSet::new();
        for c in &claims {
            if !tokens.insert(c.token.as_u128()) {
                return Err(Violation::new(
                    Rule::Inv2,
                    format!("token {} of item {} was handed out twice", c.token, c.id),
                ));
            }
        }
        for id in enqueued {
            let list = by_id.get(id).map(Vec::as_slice).unwrap_or(&[]);
            check_item(*id, list, dead_count.contains_key(id))?;
        }
        Ok(())
    }
}

/// The per-item verdict: acked exactly once or Dead, never both; no
/// overlapping live leases; no stale success; nothing after the ack.
fn check_item(id: ItemId, claims: &[&Claim], is_dead: bool) -> Result<(), Violation> {
    let acks: Vec<&&Claim> = claims
        .iter()
        .filter(|c| matches!(c.end, Some((End::Acked, ..))))
        .collect();
    let story = || describe(claims);
    if acks.len() > 1 {
        return Err(Violation::new(
            Rule::Inv5,
            format!("item {id} was acked {} times: {}", acks.len(), story()),
        ));
    }
    match (acks.len(), is_dead) {
        (1, true) => {
            return Err(Violation::new(
                Rule::Inv5,
                format!("item {id} was acked and is also Dead: {}", story()),
            ))
        }
        (0, false) => {
            return Err(Violation::new(
                Rule::Inv5,
                format!("item {id} was lost: neither acked nor Dead: {}", story()),
            ))
        }
        _ => {}
    }
    if let Some(ack) = acks.first() {
        let done = ack.end.map_or(u64::MAX, |e| e.2);
        if let Some(late) = claims.iter().find(|c| c.asked > done) {
            return Err(Violation::new(
                Rule::Inv10,
                format!(
                    "item {id} was claimed again (attempt {}) after its ack succeeded: {}",
                    late.attempts,
                    story()
                ),
            ));
        }
    }
    let mut sorted: Vec<&&Claim> = claims.iter().collect();
    sorted.sort_by_key(|c| (c.expires_at, c.got));
    for pair in sorted.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Only a release or fail that surely took effect after b's claim
        // returned proves an overlap; one that may have come first does not.
        let settled_before = matches!(a.end, Some((e, started, _)) if e != End::Lost && e != End::Crashed && started < b.got);
        // b was handed out while the backend's clock had not yet reached a's
        // expiry (read after b's claim returned), and a was not settled.
        if b.seen < a.expires_at && !settled_before {
            return Err(Violation::new(
                Rule::Inv2,
                format!(
                    "item {id} was leased to two workers at once: attempt {} was handed out by {} while attempt {} held it until {}: {}",
                    b.attempts, b.seen, a.attempts, a.expires_at, story()
                ),
            ));
        }
        let a_won_late = matches!(a.end, Some((End::Acked | End::Failed | End::Released { .. }, started, _)) if started > b.got);
        if a_won_late {
            return Err(Violation::new(
                Rule::Inv3,
                format!(
                    "item {id}: attempt {} settled its lease after attempt {} had re-claimed the item (a stale token won): {}",
                    a.attempts, b.attempts, story()
                ),
            ));
        }
    }
    Ok(())
}

fn describe(claims: &[&Claim]) -> String {
    let parts: Vec<String> = claims
        .iter()
        .map(|c| {
            let end = match c.end {
                Some((e, _, _)) => format!("{e:?}"),
                None => "unsettled".into(),
            };
            format!(
                "[attempt {} granted {} expires {} -> {end}]",
                c.attempts, c.granted, c.expires_at
            )
        })
        .collect();
    parts.join(" ")
}
