//! Inspection against the model: `stats`, `peek` and `item` must show what
//! the model holds, in the order each index keeps.

use leaseq_core::{Error, ItemId, ItemInfo, ItemState, QueueName, QueueStats, Result};

use super::state::{Entry, Model, Note, Slot};
use super::window::Window;
use crate::outcome::ensure;
use crate::{Rule, Violation};

fn contract(what: &'static str, msg: impl Into<String>) -> Violation {
    Violation::new(Rule::Contract(what), msg)
}

impl Model {
    /// The state the item shows at `now` (a due Scheduled item shows as
    /// Ready).
    pub fn shown(e: &Entry, now: Window) -> Result<ItemState, Violation> {
        Ok(match e.slot {
            Slot::Ready => ItemState::Ready,
            Slot::Scheduled { .. } if Self::claimable(e, now)? => ItemState::Ready,
            Slot::Scheduled { .. } => ItemState::Scheduled,
            Slot::Leased { .. } => ItemState::Leased,
            Slot::Dead { .. } => ItemState::Dead,
        })
    }

    /// Counts per state at `now`.
    pub fn expected_stats(&self, now: Window) -> Result<QueueStats, Violation> {
        let mut s = QueueStats {
            paused: self.paused,
            // Counted by backends with History, which the runs keep.
            completed: self.kept.is_some().then_some(self.completed),
            ..QueueStats::default()
        };
        for e in self.items.values() {
            match Self::shown(e, now)? {
                ItemState::Ready => s.ready += 1,
                ItemState::Scheduled => s.scheduled += 1,
                ItemState::Leased => s.leased += 1,
                ItemState::Dead => s.dead += 1,
            }
        }
        Ok(s)
    }

    /// `stats()` at `now` answered `got`.
    pub fn stats(&self, now: Window, got: &Result<QueueStats>) -> Result<(), Violation> {
        let got = got
            .as_ref()
            .map_err(|e| contract("stats", format!("stats failed: {e}")))?;
        let mut want = self.expected_stats(now)?;
        if self.kept.is_none() {
            // Without History the count is not part of the contract.
            want.completed = got.completed;
        }
        ensure!(
            *got == want,
            Rule::Inv1,
            "stats at {now} are {got:?}, the model holds {want:?}"
        );
        Ok(())
    }

    /// `queues()` answered `got`: sorted, each name once, and `queue` (the
    /// model's) in it exactly while the model holds an item. Other queues
    /// may be listed: the backend may be shared.
    pub fn listing(
        &self,
        queue: &QueueName,
        got: &Result<Vec<QueueName>>,
    ) -> Result<(), Violation> {
        let got = got
            .as_ref()
            .map_err(|e| contract("queues", format!("queues failed: {e}")))?;
        ensure!(
            got.windows(2).all(|w| w[0] < w[1]),
            Rule::Contract("queues"),
            "queues() is not sorted by name with each queue once: {got:?}"
        );
        let listed = got.contains(queue);
        let holds = !self.items.is_empty();
        ensure!(
            listed == holds,
            Rule::Contract("queues"),
            "queues() {} the queue while the model holds {} items",
            if listed { "lists" } else { "leaves out" },
            self.items.len()
        );
        Ok(())
    }

    /// `item(id)` at `now` answered `got`.
    pub fn item(&self, id: ItemId, now: Window, got: &Result<ItemInfo>) -> Result<(), Violation> {
        match (self.items.get(&id), got) {
            (Some(e), Ok(info)) => self.check_info(id, e, now, info),
            (None, Err(Error::NotFound { .. })) => Ok(()),
            (None, Ok(info)) if self.gone.contains(&id) => Err(Violation::new(
                Rule::Inv10,
                format!("item({id}) shows an acked or purged item: {info:?}"),
            )),
            (_, other) => Err(contract(
                "item",
                format!(
                    "item({id}) answered {other:?}; the model holds {:?}",
                    self.items.get(&id)
                ),
            )),
        }
    }

    fn check_info(
        &self,
        id: ItemId,
        e: &Entry,
        now: Window,
        info: &ItemInfo,
    ) -> Result<(), Violation> {
        let state = Self::shown(e, now)?;
        let seen = (
            info.id,
            info.state,
            &info.payload,
            info.priority,
            info.attempts,
            info.max_attempts,
            info.dedup_key.as_deref(),
            info.cancel_requested,
        );
        let want = (
            id,
            state,
            &e.payload,
            e.priority,
            e.attempts,
            e.max_attempts,
            e.dedup.as_deref(),
            e.cancel_requested && matches!(e.slot, Slot::Leased { .. }),
        );
        ensure!(
            seen == want,
            Rule::Contract("item"),
            "at {now}, {id} shows (id, state, payload, priority, attempts, max, key) {seen:?}; \
             the model holds {want:?}"
        );
        let due = match (&e.slot, state) {
            (Slot::Scheduled { due }, ItemState::Scheduled) => Some(*due),
            (Slot::Leased { expires, .. }, _) => Some(*expires),
            _ => None,
        };
        let due_ok = match (due, info.due_at) {
            (Some(w), Some(t)) => w.contains(t.as_millis()),
            (None, None) => true,
            _ => false,
        };
        ensure!(
            due_ok,
            Rule::Contract("item"),
            "at {now}, {id} ({state}) shows due_at {:?}; expected {}",
            info.due_at,
            due.map_or("none".to_owned(), |w| w.to_string())
        );
        let note_ok = match &e.note {
            Note::Is(want) => info.last_error == *want,
            Note::Some => info.last_error.as_ref().is_some_and(|s| !s.is_empty()),
            Note::Free => true,
        };
        ensure!(
            note_ok,
            Rule::Contract("item"),
            "{id} shows last_error {:?}; expected {:?}",
            info.last_error,
            e.note
        );
        Ok(())
    }

    /// `peek(state, limit)` at `now` answered `got`.
    pub fn peek(
        &self,
        state: ItemState,
        limit: usize,
        now: Window,
        got: &Result<Vec<ItemInfo>>,
    ) -> Result<(), Violation> {
        let got = got
            .as_ref()
            .map_err(|e| contract("peek", format!("peek({state}, {limit}) failed: {e}")))?;
        let mut members = Vec::new();
        for (id, e) in &self.items {
            if Self::shown(e, now)? == state {
                members.push(*id);
            }
        }
        ensure!(
            got.len() == members.len().min(limit),
            Rule::Contract("peek"),
            "peek({state}, {limit}) returned {} items; {} are {state}",
            got.len(),
            members.len()
        );
        let ids: Vec<ItemId> = got.iter().map(|i| i.id).collect();
        for info in got {
            let e = self.items.get(&info.id).ok_or_else(|| {
                contract(
                    "peek",
                    format!(
                        "peek({state}) returned {}, which is not in the queue",
                        info.id
                    ),
                )
            })?;
            self.check_info(info.id, e, now, info)?;
            ensure!(
                members.contains(&info.id),
                Rule::Contract("peek"),
                "peek({state}) returned {}, which is not {state}",
                info.id
            );
        }
        if state == ItemState::Ready {
            return self.check_order("peek(ready)", &members, &ids);
        }
        if self.orders_per_shard() {
            return Ok(());
        }
        // The rank an index sorts by: (earliest, latest) possible key.
        let rank = |id: &ItemId| -> (u64, u64) {
            match self.items.get(id).map(|e| &e.slot) {
                Some(Slot::Scheduled { due: w }) | Some(Slot::Leased { expires: w, .. }) => {
                    (w.lo, w.hi)
                }
                Some(Slot::Dead { epoch }) => (*epoch, *epoch),
                _ => (0, u64::MAX),
            }
        };
        for pair in ids.windows(2) {
            let (a, b) = (rank(&pair[0]), rank(&pair[1]));
            ensure!(
                a.0 <= b.1,
                Rule::Contract("peek"),
                "peek({state}) order: {} before {}",
                pair[0],
                pair[1]
            );
        }
        for x in &ids {
            for y in members.iter().filter(|y| !ids.contains(y)) {
                ensure!(
                    rank(x).0 <= rank(y).1,
                    Rule::Contract("peek"),
                    "peek({state}, {limit}) returned {x} and left {y}, which comes first"
                );
            }
        }
        Ok(())
    }
}
