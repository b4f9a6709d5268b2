//! The verdict of a storm: every item whose enqueue returned Ok ends acked,
//! Dead or (with an operator) Cancelled, exactly once; nothing is delivered
//! after its ack, nor after a cancel answered `Now` for it.

use std::sync::Mutex;

use leaseq_core::{Cancelled, Error, ItemId};

use crate::cancels::{CancelFigures, Cancels};
use crate::idset::IdSet;

#[derive(Debug, Default)]
struct Book {
    enqueued: IdSet,
    acked: IdSet,
    /// Ids acked more than once.
    twice: Vec<ItemId>,
    acks: u64,
    dead: IdSet,
    /// Acks whose reply was lost and whose item was gone afterwards.
    unsure: IdSet,
    after_ack: Vec<ItemId>,
    stray: Vec<ItemId>,
    runs: u64,
    /// Orders deliveries and cancel answers.
    seq: u64,
    cancels: Cancels,
}

/// A storm's counts, for a report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Items enqueued with an Ok reply.
    pub enqueued: usize,
    /// Items acked (once or more).
    pub acked: usize,
    /// Items that went Dead.
    pub dead: usize,
    /// Items whose ack's reply was lost and that were gone afterwards.
    pub unsure: usize,
    /// Items enqueued Ok and neither acked, Dead nor unsure.
    pub lost: usize,
    /// Items acked more than once.
    pub acked_twice: usize,
    /// Handler runs of an item after its ack.
    pub after_ack: usize,
    /// Outcomes reported for an item the worker was not running.
    pub stray: usize,
    /// Handler runs.
    pub runs: u64,
    /// What the operator did, if there was one.
    pub cancels: CancelFigures,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} enqueued Ok, {} acked, {} dead, {} unsure, {} lost, {} acked twice, \
             {} runs after an ack, {} stray outcomes, {} handler runs",
            self.enqueued,
            self.acked,
            self.dead,
            self.unsure,
            self.lost,
            self.acked_twice,
            self.after_ack,
            self.stray,
            self.runs
        )?;
        if self.cancels != CancelFigures::default() {
            write!(f, "; {}", self.cancels)?;
        }
        Ok(())
    }
}

/// What a storm did, shared by its tasks.
#[derive(Debug, Default)]
pub struct Ledger(Mutex<Book>);

impl Ledger {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An enqueue returned Ok with these ids.
    pub fn enqueued(&self, ids: &[ItemId]) {
        let mut b = self.book();
        for id in ids {
            b.enqueued.insert(*id);
            b.cancels.enqueued(*id);
        }
    }

    /// A handler started on `id`; returns false when `id` was acked before
    /// (a redelivery after ack, INV-10).
    pub fn delivered(&self, id: ItemId) -> bool {
        let mut b = self.book();
        b.runs += 1;
        b.seq += 1;
        let seq = b.seq;
        b.cancels.delivered(id, seq);
        if b.acked.contains(id) {
            b.after_ack.push(id);
            return false;
        }
        true
    }

    /// An ack of `id` returned Ok.
    pub fn acked(&self, id: ItemId) {
        let mut b = self.book();
        b.acks += 1;
        b.cancels.ended(id, "acked");
        if !b.acked.insert(id) {
            b.twice.push(id);
        }
    }

    /// `id` went Dead.
    pub fn dead(&self, id: ItemId) {
        let mut b = self.book();
        b.dead.insert(id);
        b.cancels.dead(id);
    }

    /// A worker reported `id` ended Cancelled.
    pub fn cancelled(&self, id: ItemId) {
        let mut b = self.book();
        let acked = b.acked.contains(id);
        b.cancels.by_worker(id, acked);
    }

    /// The operator is about to send a cancel of `id` (recorded before the
    /// call: the worker it reaches may report the item ended Cancelled
    /// before the call's answer is back).
    pub fn cancel_asked(&self, id: ItemId) {
        self.book().cancels.asking(id);
    }

    /// A cancel of `id` answered `answer` (recorded after the answer, so a
    /// delivery recorded later surely came after it).
    pub fn cancel_answered(&self, id: ItemId, answer: &Result<Cancelled, Error>) {
        let mut b = self.book();
        b.seq += 1;
        let (seq, acked) = (b.seq, b.acked.contains(id));
        b.cancels.answered(id, answer, seq, acked);
    }

    /// The operator paused the queue.
    pub fn paused(&self) {
        self.book().cancels.paused();
    }

    /// The operator resumed the queue.
    pub fn resumed(&self) {
        self.book().cancels.resumed();
    }

    /// A recent id for the operator to cancel, chosen by `r`.
    pub fn pick(&self, r: u64) -> Option<ItemId> {
        self.book().cancels.pick(r)
    }

    /// `id`, open at the end, is gone from the store: ended Cancelled when
    /// a cancel was asked for it; false (still open) otherwise.
    pub fn gone(&self, id: ItemId) -> bool {
        self.book().cancels.gone(id)
    }

    /// Items acked, Dead or Cancelled so far.
    pub fn finished(&self) -> u64 {
        let b = self.book();
        b.acks + (b.dead.len() + b.cancels.count()) as u64
    }

    /// A worker reported an outcome for `id`, which it was not running.
    pub fn stray(&self, id: ItemId) {
        self.book().stray.push(id);
    }

    /// An ack of `id` failed on the wire and the item was gone afterwards.
    pub fn unsure(&self, id: ItemId) {
        self.book().unsure.insert(id);
    }

    /// Successful acks so far.
    pub fn acks(&self) -> u64 {
        self.book().acks
    }

    /// Handler runs so far.
    pub fn runs(&self) -> u64 {
        self.book().runs
    }

    /// Items enqueued with an Ok reply so far.
    pub fn enqueued_count(&self) -> usize {
        self.book().enqueued.len()
    }

    /// Enqueued items not yet accounted for (acked, Dead or unsure).
    pub fn open(&self) -> Vec<ItemId> {
        let b = self.book();
        b.enqueued
            .iter()
            .filter(|id| {
                !b.acked.contains(*id)
                    && !b.dead.contains(*id)
                    && !b.unsure.contains(*id)
                    && !b.cancels.is_cancelled(*id)
            })
            .collect()
    }

    /// The counts so far.
    pub fn figures(&self) -> Figures {
        let open = self.open().len();
        let b = self.book();
        Figures {
            enqueued: b.enqueued.len(),
            acked: b.acked.len(),
            dead: b.dead.len(),
            unsure: b.unsure.len(),
            lost: open,
            acked_twice: b.twice.len(),
            after_ack: b.after_ack.len(),
            stray: b.stray.len(),
            runs: b.runs,
            cancels: b.cancels.figures(&b.acked, &b.dead),
        }
    }

    /// Mid-run: `Err` when an item was acked twice or delivered after its
    /// ack (items still in flight are not judged yet).
    pub fn interim(&self) -> Result<(), String> {
        let b = self.book();
        let twice = b.twice.len();
        if twice > 0 || !b.after_ack.is_empty() {
            return Err(format!(
                "{twice} items acked twice; delivered after ack: {:?}",
                b.after_ack
            ));
        }
        if !b.cancels.after_now.is_empty() || !b.cancels.wrong.is_empty() {
            return Err(format!(
                "delivered after a cancel answered Now (id, delivery, answer): {:?}; {:?}",
                b.cancels.after_now, b.cancels.wrong
            ));
        }
        Ok(())
    }

    /// `Ok(summary)` when nothing was lost, acked twice or delivered after
    /// its ack; otherwise what went wrong.
    pub fn verdict(&self) -> Result<String, String> {
        let (twice, after_ack, summary, after_now, wrong) = {
            let b = self.book();
            let twice = b.twice.clone();
            let summary = format!(
                "{} enqueued Ok, {} acked, {} dead, {} cancelled, {} acks with a lost reply, \
                 {} handler runs",
                b.enqueued.len(),
                b.acked.len(),
                b.dead.len(),
                b.cancels.count(),
                b.unsure.len(),
                b.runs
            );
            let mut odd = b.after_ack.clone();
            odd.extend(b.stray.iter().copied());
            let c = &b.cancels;
            (twice, odd, summary, c.after_now.clone(), c.wrong.clone())
        };
        let open = self.open();
        let mut problems = Vec::new();
        if !twice.is_empty() {
            problems.push(format!("acked twice: {twice:?}"));
        }
        if !open.is_empty() {
            problems.push(format!(
                "lost (enqueued Ok, never acked, Dead or Cancelled): {open:?}"
            ));
        }
        if !after_ack.is_empty() {
            problems.push(format!(
                "delivered after ack, or an outcome from a worker not running it: {after_ack:?}"
            ));
        }
        if !after_now.is_empty() {
            problems.push(format!(
                "delivered after a cancel answered Now (id, delivery, answer): {after_now:?}"
            ));
        }
        if !wrong.is_empty() {
            problems.push(format!("ended twice or wrongly: {wrong:?}"));
        }
        if problems.is_empty() {
            Ok(summary)
        } else {
            Err(problems.join("; "))
        }
    }
}

#[cfg(test)]
mod cancel_tests {
    use leaseq_core::{Cancelled, Error, ItemId, ItemState};

    use super::Ledger;

    fn now(was: ItemState) -> Result<Cancelled, Error> {
        Ok(Cancelled::Now { was })
    }

    /// The operator's cancel of `id`, answered `answer`.
    fn cancel(l: &Ledger, id: ItemId, answer: &Result<Cancelled, Error>) {
        l.cancel_asked(id);
        l.cancel_answered(id, answer);
    }

    #[test]
    fn each_item_ends_once_acked_dead_or_cancelled() {
        let l = Ledger::default();
        let ids: Vec<ItemId> = (1..=5).map(ItemId::new).collect();
        l.enqueued(&ids);
        cancel(&l, ids[0], &now(ItemState::Ready));
        // Requested, then whatever ended the lease.
        l.delivered(ids[1]);
        cancel(&l, ids[1], &Ok(Cancelled::Requested));
        l.acked(ids[1]);
        l.delivered(ids[2]);
        cancel(&l, ids[2], &Ok(Cancelled::Requested));
        l.cancelled(ids[2]);
        // Dead, then cancelled; its Dead event may come after the answer.
        cancel(&l, ids[3], &now(ItemState::Dead));
        l.dead(ids[3]);
        // Requested, then reaped: gone at the end.
        l.delivered(ids[4]);
        cancel(&l, ids[4], &Ok(Cancelled::Requested));
        assert!(l.gone(ids[4]));
        assert!(l.verdict().is_ok(), "{:?}", l.verdict());
        let c = l.figures().cancels;
        assert_eq!((c.now(), c.requested, c.now_dead), (2, 3, 1));
    }

    #[test]
    fn a_delivery_after_now_or_a_second_end_fails_the_verdict() {
        let l = Ledger::default();
        let (a, b, c) = (ItemId::new(1), ItemId::new(2), ItemId::new(3));
        l.enqueued(&[a, b, c]);
        cancel(&l, a, &now(ItemState::Ready));
        l.delivered(a);
        assert!(l.interim().is_err() && l.verdict().is_err());
        let l = Ledger::default();
        l.enqueued(&[b, c]);
        cancel(&l, b, &now(ItemState::Scheduled));
        l.acked(b);
        l.cancelled(c); // no cancel asked for it
        let e = l.verdict().expect_err("ended twice or wrongly");
        assert!(
            e.contains("after it had ended") && e.contains("no cancel asked"),
            "{e}"
        );
    }

    /// The worker a cancel reaches may report the item ended Cancelled
    /// before the operator's call has its answer back.
    #[test]
    fn a_worker_may_report_a_cancel_before_its_answer() {
        let l = Ledger::default();
        let id = ItemId::new(9);
        l.enqueued(&[id]);
        l.delivered(id);
        l.cancel_asked(id);
        l.cancelled(id);
        l.cancel_answered(id, &Ok(Cancelled::Requested));
        assert!(l.verdict().is_ok(), "{:?}", l.verdict());
    }

    #[test]
    fn an_open_item_with_no_cancel_stays_lost() {
        let l = Ledger::default();
        l.enqueued(&[ItemId::new(7)]);
        assert!(!l.gone(ItemId::new(7)));
        assert!(l.verdict().is_err());
    }
}
