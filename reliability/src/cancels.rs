//! The operator's side of a storm's ledger: which items a cancel ended at
//! once (and when, on the ledger's sequence of deliveries and answers),
//! which it asked to cancel while they ran and how those ended, and the
//! recent ids the operator picks from.

use std::collections::{HashMap, VecDeque};

use leaseq_core::{Cancelled, Error, ItemId, ItemState};

use crate::idset::IdSet;

/// Recent ids kept per kind for the operator to pick from.
const RECENT: usize = 256;

/// What the operator did and what became of it.
#[derive(Debug, Default)]
pub(crate) struct Cancels {
    /// Items a cancel answered `Now` for, with the sequence of the answer
    /// and the state the item was in.
    pub(crate) now: HashMap<ItemId, (u64, ItemState)>,
    /// `Now` answers by the state the item was in: Ready, Scheduled, Dead.
    now_was: [u64; 3],
    /// Items the operator sent a cancel for, recorded before the call: a
    /// worker may report the cancel it caused before its answer is
    /// recorded.
    pub(crate) asked: IdSet,
    /// Items a cancel answered `Requested` for.
    pub(crate) requested: IdSet,
    /// Items a worker reported ended Cancelled.
    pub(crate) by_worker: IdSet,
    /// Requested items found gone at the end with no worker outcome (the
    /// reaper ended them Cancelled).
    pub(crate) gone: IdSet,
    /// Items a cancel call failed for (the answer is unknown).
    pub(crate) unknown: IdSet,
    /// Of those, the ones gone at the end with no outcome.
    pub(crate) unknown_gone: IdSet,
    not_found: u64,
    /// Deliveries after a `Now`: (id, delivery sequence, answer sequence).
    pub(crate) after_now: Vec<(ItemId, u64, u64)>,
    /// Items that ended twice, or ended Cancelled with no cancel asked.
    pub(crate) wrong: Vec<String>,
    pauses: u64,
    resumes: u64,
    enqueued: VecDeque<ItemId>,
    runs: VecDeque<ItemId>,
    dead: VecDeque<ItemId>,
}

/// The operator's counts, for a report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CancelFigures {
    /// Cancels answered `Now` for a Ready item.
    pub now_ready: u64,
    /// Cancels answered `Now` for a Scheduled item.
    pub now_scheduled: u64,
    /// Cancels answered `Now` for a Dead item.
    pub now_dead: u64,
    /// Items a cancel answered `Requested` for.
    pub requested: usize,
    /// Of those, ended by the worker's ack.
    pub requested_acked: usize,
    /// Of those, ended by a fail (the worker saw a handler error first).
    pub requested_failed: usize,
    /// Of those, reported `Cancelled` by the worker.
    pub requested_cancelled: usize,
    /// Of those, found gone at the end with no outcome (reaped).
    pub requested_reaped: usize,
    /// Cancels answered `NotFound` (the item had ended).
    pub not_found: u64,
    /// Cancel calls that failed (answer unknown).
    pub failed: usize,
    /// Deliveries after a cancel answered `Now`.
    pub after_now: usize,
    /// Items that ended twice, or Cancelled with no cancel asked.
    pub wrong: usize,
    /// Pauses.
    pub pauses: u64,
    /// Resumes.
    pub resumes: u64,
}

impl CancelFigures {
    /// Cancels answered `Now`.
    pub fn now(&self) -> u64 {
        self.now_ready + self.now_scheduled + self.now_dead
    }
}

impl std::fmt::Display for CancelFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cancels: {} Now (ready {}, scheduled {}, dead {}), {} Requested (then acked {}, \
             failed {}, cancelled by the worker {}, reaped {}), {} NotFound, {} failed calls; \
             {} delivered after Now, {} ended twice or wrongly; {} pauses, {} resumes",
            self.now(),
            self.now_ready,
            self.now_scheduled,
            self.now_dead,
            self.requested,
            self.requested_acked,
            self.requested_failed,
            self.requested_cancelled,
            self.requested_reaped,
            self.not_found,
            self.failed,
            self.after_now,
            self.wrong,
            self.pauses,
            self.resumes
        )
    }
}

fn remember(ring: &mut VecDeque<ItemId>, id: ItemId) {
    if ring.len() == RECENT {
        ring.pop_front();
    }
    ring.push_back(id);
}

impl Cancels {
    pub(crate) fn enqueued(&mut self, id: ItemId) {
        remember(&mut self.enqueued, id);
    }

    /// A delivery at sequence `seq`: wrong after a `Now`.
    pub(crate) fn delivered(&mut self, id: ItemId, seq: u64) {
        remember(&mut self.runs, id);
        if let Some(&(at, _)) = self.now.get(&id) {
            self.after_now.push((id, seq, at));
        }
    }

    pub(crate) fn dead(&mut self, id: ItemId) {
        remember(&mut self.dead, id);
        // A worker's Dead event may reach the ledger after a cancel of the
        // Dead item answered.
        if self
            .now
            .get(&id)
            .is_some_and(|(_, was)| *was != ItemState::Dead)
        {
            self.wrong
                .push(format!("{id} went Dead after a cancel ended it"));
        }
    }

    /// An item ended by an ack or a worker's `Cancelled`: wrong when it had
    /// ended before.
    pub(crate) fn ended(&mut self, id: ItemId, how: &str) {
        if self.now.contains_key(&id) || self.by_worker.contains(id) {
            self.wrong
                .push(format!("{id} {how} after it had ended Cancelled"));
        }
    }

    /// A worker reported `id` ended Cancelled; `acked` is whether it was
    /// acked before.
    pub(crate) fn by_worker(&mut self, id: ItemId, acked: bool) {
        self.ended(id, "ended Cancelled again");
        if acked {
            self.wrong
                .push(format!("{id} ended Cancelled after its ack"));
        }
        if !self.asked.contains(id) {
            self.wrong
                .push(format!("{id} ended Cancelled but no cancel asked for it"));
        }
        self.by_worker.insert(id);
    }

    /// The operator is about to send a cancel of `id`.
    pub(crate) fn asking(&mut self, id: ItemId) {
        self.asked.insert(id);
    }

    /// A cancel of `id` answered at sequence `seq`; `ended` is whether an
    /// ack had ended it before.
    pub(crate) fn answered(
        &mut self,
        id: ItemId,
        answer: &Result<Cancelled, Error>,
        seq: u64,
        ended: bool,
    ) {
        match answer {
            Ok(Cancelled::Now { was }) => {
                if ended || self.now.contains_key(&id) || self.by_worker.contains(id) {
                    self.wrong
                        .push(format!("{id}: a cancel answered Now after it had ended"));
                }
                self.now.entry(id).or_insert((seq, *was));
                match was {
                    ItemState::Scheduled => self.now_was[1] += 1,
                    ItemState::Dead => self.now_was[2] += 1,
                    _ => self.now_was[0] += 1,
                }
            }
            Ok(_) => {
                self.requested.insert(id);
            }
            Err(Error::NotFound { .. }) => self.not_found += 1,
            Err(_) => {
                self.unknown.insert(id);
            }
        }
    }

    pub(crate) fn paused(&mut self) {
        self.pauses += 1;
    }

    pub(crate) fn resumed(&mut self) {
        self.resumes += 1;
    }

    /// Whether `id` ended Cancelled (as far as the ledger knows).
    pub(crate) fn is_cancelled(&self, id: ItemId) -> bool {
        self.now.contains_key(&id)
            || self.by_worker.contains(id)
            || self.gone.contains(id)
            || self.unknown_gone.contains(id)
    }

    /// Items ended Cancelled.
    pub(crate) fn count(&self) -> usize {
        self.now.len() + self.by_worker.len()
    }

    /// `id`, open at the end, is gone from the store: reaped as Cancelled
    /// when a cancel was asked; false otherwise.
    pub(crate) fn gone(&mut self, id: ItemId) -> bool {
        if self.requested.contains(id) {
            self.gone.insert(id)
        } else if self.unknown.contains(id) {
            self.unknown_gone.insert(id)
        } else {
            false
        }
    }

    /// A recent id for the operator: from `r`, one of the recently
    /// enqueued (Ready or Scheduled), run (Leased, or ended) or Dead items.
    pub(crate) fn pick(&self, r: u64) -> Option<ItemId> {
        let ring = match r % 10 {
            0..=3 => &self.enqueued,
            4..=7 => &self.runs,
            _ => &self.dead,
        };
        let ring = if ring.is_empty() {
            &self.enqueued
        } else {
            ring
        };
        let n = ring.len() as u64;
        // Of the runs, one of the latest few: likely still Leased.
        let window = if std::ptr::eq(ring, &self.runs) {
            n.min(8)
        } else {
            n
        };
        (n > 0).then(|| ring[(n - 1 - (r / 10) % window.max(1)) as usize])
    }

    pub(crate) fn figures(&self, acked: &IdSet, dead: &IdSet) -> CancelFigures {
        let of = |set: &IdSet| self.requested.iter().filter(|id| set.contains(*id)).count();
        CancelFigures {
            now_ready: self.now_was[0],
            now_scheduled: self.now_was[1],
            now_dead: self.now_was[2],
            requested: self.requested.len(),
            requested_acked: of(acked),
            requested_failed: of(dead),
            requested_cancelled: of(&self.by_worker),
            requested_reaped: self.gone.len(),
            not_found: self.not_found,
            failed: self.unknown.len(),
            after_now: self.after_now.len(),
            wrong: self.wrong.len(),
            pauses: self.pauses,
            resumes: self.resumes,
        }
    }
}
