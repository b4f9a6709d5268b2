//! The delete protocol and its id floor, as Redis runs it
//! (backend-redis/src/delete.rs), abstractly: what keeps a deleted queue's
//! ids from coming back.
//!
//! The store has two places, as the Redis keys do: the queue's own (its
//! id counter, its items, `listed`, the prune generation) and the
//! registry's (the id floor), and a script runs in one of them at a time.
//! - An enqueue computes its id as `enqueue_batch.lua` does: one above the
//!   highest of the counter (or, when the queue has no counter, of its
//!   highest item and the floor its registration read) and of the highest
//!   id this backend handle has seen in the queue. A queue that is not
//!   `listed` takes an item only from a call that registered in the
//!   current generation (`queues_register.lua`, which returns the floor).
//! - `delete_queue` loops: purge; `queue_delete` with the floor the
//!   operator raised: busy while items came in since, behind while the
//!   queue handed out ids above that floor (raise it past the last id with
//!   headroom, and again), else it deletes the counter and `listed` and
//!   raises the generation.
//! - A handle restarts knowing no id and holding no registration: the
//!   store is what is durable.
//!
//! Each step is one script (one atomic step); the ghost records every id
//! handed out.

use std::collections::BTreeSet;
use std::fmt::Write;

use stateright::{Model, Property};

use crate::check::Focus;

/// Ids are never handed out twice, across deletes and restarts.
pub const IDS_UNIQUE: &str = "ids are never reused across delete and restart";
/// Reachable (an example): an item is enqueued after the queue was
/// deleted. Shows the enqueue after a delete is explored.
pub const ENQUEUE_AFTER_DELETE: &str = "an item is enqueued after a delete";
/// Reachable (an example): enqueues racing a delete pass the floor it
/// raised, and it raises the floor again. Shows the headroom's race is
/// explored.
pub const FLOOR_RAISED_AGAIN: &str = "a delete raises the floor twice";

/// The size of the delete protocol's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdBounds {
    /// Backend handles that enqueue (each with its own seen-id floor).
    pub handles: u8,
    /// Enqueue calls, in total (one item each).
    pub enqueues: u8,
    /// Handle restarts, in total.
    pub restarts: u8,
    /// `delete_queue` calls.
    pub deletes: u8,
    /// Plain `purge` calls.
    pub purges: u8,
    /// Ids above the queue's last one the operator first raises the floor
    /// by (`FLOOR_HEADROOM`), doubled each time it falls short.
    pub headroom: u8,
}

impl IdBounds {
    /// The bounds CI checks: 2 handles, 4 enqueues, 1 restart, 2
    /// deletes, 1 purge, a headroom of 1 (so an enqueue racing the delete
    /// can pass the floor).
    pub fn ci() -> Self {
        IdBounds {
            handles: 2,
            enqueues: 4,
            restarts: 1,
            deletes: 2,
            purges: 1,
            headroom: 1,
        }
    }

    /// The larger bounds behind `LEASEQ_MODEL_BIG=1`: a third handle, one
    /// more enqueue and one more restart.
    pub fn big() -> Self {
        IdBounds {
            handles: 3,
            enqueues: 5,
            restarts: 2,
            ..IdBounds::ci()
        }
    }

    /// One handle that restarts: the id it reuses after a delete can only
    /// come from the store, not from a second handle that never saw it.
    pub fn one_handle() -> Self {
        IdBounds {
            handles: 1,
            ..IdBounds::ci()
        }
    }
}

/// Faults seeded into the delete protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct IdFaults {
    /// `queue_delete` deletes the counter whatever ids the queue handed
    /// out, and the operator never raises the floor.
    pub delete_without_floor: bool,
    /// The enqueue accepts a registration of any generation (the
    /// listing's fault, seen here through the ids).
    pub enqueue_without_generation: bool,
}

/// A registration as a handle holds it during one enqueue call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Registration {
    /// The prune generation the store named.
    pub generation: u8,
    /// The registry's id floor it read.
    pub floor: u8,
}

/// Where a handle's enqueue call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    /// No call in flight.
    Idle,
    /// The script answered `unregistered` naming this generation; next:
    /// register.
    Unregistered(u8),
    /// Registered; next: the script again, with the registration.
    Registered(Registration),
}

/// One backend handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Handle {
    /// The highest id it has seen in the queue (`IdFloors`), 0 for none.
    pub seen: u8,
    /// Its enqueue call.
    pub call: Call,
}

/// Where the operator's `delete_queue` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deleting {
    /// No delete in flight.
    Idle,
    /// Next: a purge, then `queue_delete` with this floor.
    Purge {
        /// The floor the operator holds.
        floor: u8,
        /// The headroom of its next raise.
        headroom: u8,
    },
    /// Next: `queue_delete` with this floor.
    Delete {
        /// The floor the operator holds.
        floor: u8,
        /// The headroom of its next raise.
        headroom: u8,
    },
    /// `queue_delete` answered behind; next: raise the registry's floor to
    /// `want`.
    Raise {
        /// The queue's last id plus the headroom.
        want: u8,
        /// The headroom of the raise after this one.
        headroom: u8,
    },
}

/// The delete protocol's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdState {
    /// The queue's id counter (`seq`, `idmark`); `None`: deleted.
    pub counter: Option<u8>,
    /// The ids of the items the queue holds.
    pub items: BTreeSet<u8>,
    /// Whether `listed` is present.
    pub listed: bool,
    /// The queue's prune generation (`listgen`).
    pub generation: u8,
    /// The registry's id floor.
    pub floor: u8,
    /// The backend handles.
    pub handles: Vec<Handle>,
    /// The operator's delete.
    pub deleting: Deleting,
    /// Enqueue calls still allowed.
    pub enqueues_left: u8,
    /// Restarts still allowed.
    pub restarts_left: u8,
    /// Deletes still allowed.
    pub deletes_left: u8,
    /// Purges still allowed.
    pub purges_left: u8,
    /// Ghost: every id handed out.
    pub issued: BTreeSet<u8>,
    /// Ghost: an id was handed out twice.
    pub reused: bool,
    /// Ghost: deletes that completed.
    pub deleted: u8,
    /// Ghost: items enqueued after a delete completed.
    pub enqueued_after_delete: u8,
    /// Ghost: floor raises of the delete in flight.
    pub raises: u8,
}

/// One step of the delete protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdAction {
    /// The enqueue script (`enqueue_batch.lua`) for one item.
    Enqueue {
        /// The handle.
        handle: u8,
    },
    /// `queues_register`: a fresh token in the registry; reads the floor.
    Register {
        /// The handle.
        handle: u8,
    },
    /// The handle's process restarts.
    Restart {
        /// The handle.
        handle: u8,
    },
    /// The operator's `purge` (not part of a delete).
    Purge,
    /// `delete_queue` starts: its first purge.
    DeleteStart,
    /// A purge of the delete's loop.
    DeletePurge,
    /// `queue_delete` with the operator's floor.
    QueueDelete,
    /// `queues_registry raise`: the registry's floor becomes at least the
    /// one asked for.
    RaiseFloor,
}

/// What a step answered, for the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdReply {
    /// An enqueue wrote this id.
    Wrote(u8),
    /// An enqueue answered `unregistered` with this generation.
    Unregistered(u8),
    /// A registration read this floor.
    Floor(u8),
    /// A purge deleted this many items.
    Purged(usize),
    /// `queue_delete`: busy (items came in since the purge).
    Busy,
    /// `queue_delete`: behind, the queue's last id.
    Behind(u8),
    /// `queue_delete`: deleted.
    Deleted,
    /// No answer (a restart).
    Nothing,
}

/// The delete protocol as a [`stateright::Model`].
#[derive(Debug, Clone)]
pub struct IdModel {
    /// The configuration's size.
    pub bounds: IdBounds,
    /// Seeded faults.
    pub faults: IdFaults,
    only: Option<&'static str>,
}

impl IdModel {
    /// The protocol as the code has it, at `bounds`.
    pub fn new(bounds: IdBounds) -> Self {
        IdModel {
            bounds,
            faults: IdFaults::default(),
            only: None,
        }
    }

    /// With `faults` seeded.
    #[must_use]
    pub fn faults(mut self, faults: IdFaults) -> Self {
        self.faults = faults;
        self
    }

    /// The start: a queue that never had an item, no delete yet.
    pub fn initial(&self) -> IdState {
        let b = &self.bounds;
        IdState {
            counter: None,
            items: BTreeSet::new(),
            listed: false,
            generation: 0,
            floor: 0,
            handles: vec![
                Handle {
                    seen: 0,
                    call: Call::Idle,
                };
                b.handles as usize
            ],
            deleting: Deleting::Idle,
            enqueues_left: b.enqueues,
            restarts_left: b.restarts,
            deletes_left: b.deletes,
            purges_left: b.purges,
            issued: BTreeSet::new(),
            reused: false,
            deleted: 0,
            enqueued_after_delete: 0,
            raises: 0,
        }
    }

    /// Applies `a` to `s`: the next state and the answer, or `None` when
    /// it is not enabled.
    pub fn step(&self, s: &IdState, a: IdAction) -> Option<(IdState, IdReply)> {
        let mut n = s.clone();
        let reply = match a {
            IdAction::Enqueue { handle } => self.enqueue(&mut n, handle)?,
            IdAction::Register { handle } => {
                let h = &mut n.handles[handle as usize];
                let Call::Unregistered(generation) = h.call else {
                    return None;
                };
                h.call = Call::Registered(Registration {
                    generation,
                    floor: n.floor,
                });
                IdReply::Floor(n.floor)
            }
            IdAction::Restart { handle } => {
                if n.restarts_left == 0 {
                    return None;
                }
                n.restarts_left -= 1;
                n.handles[handle as usize] = Handle {
                    seen: 0,
                    call: Call::Idle,
                };
                IdReply::Nothing
            }
            IdAction::Purge => {
                if n.purges_left == 0 {
                    return None;
                }
                n.purges_left -= 1;
                IdReply::Purged(purge(&mut n))
            }
            IdAction::DeleteStart => {
                if n.deletes_left == 0 || n.deleting != Deleting::Idle {
                    return None;
                }
                n.deletes_left -= 1;
                n.raises = 0;
                n.deleting = Deleting::Delete {
                    floor: 0,
                    headroom: self.bounds.headroom,
                };
                IdReply::Purged(purge(&mut n))
            }
            IdAction::DeletePurge => {
                let Deleting::Purge { floor, headroom } = n.deleting else {
                    return None;
                };
                n.deleting = Deleting::Delete { floor, headroom };
                IdReply::Purged(purge(&mut n))
            }
            IdAction::QueueDelete => self.queue_delete(&mut n)?,
            IdAction::RaiseFloor => {
                let Deleting::Raise { want, headroom } = n.deleting else {
                    return None;
                };
                n.floor = n.floor.max(want);
                n.raises += 1;
                n.deleting = Deleting::Purge {
                    floor: n.floor,
                    headroom,
                };
                IdReply::Floor(n.floor)
            }
        };
        Some((n, reply))
    }

    /// The enqueue script for one item.
    fn enqueue(&self, n: &mut IdState, handle: u8) -> Option<IdReply> {
        let h = n.handles[handle as usize];
        let registration = match h.call {
            Call::Idle if n.enqueues_left > 0 => None,
            Call::Registered(r) => Some(r),
            _ => return None,
        };
        if h.call == Call::Idle {
            n.enqueues_left -= 1;
        }
        let admitted = n.listed
            || registration.is_some_and(|r| {
                r.generation == n.generation || self.faults.enqueue_without_generation
            });
        if !admitted {
            n.handles[handle as usize].call = Call::Unregistered(n.generation);
            return Some(IdReply::Unregistered(n.generation));
        }
        // `new_ids`: a queue with no counter starts above its highest item
        // and the floor its registration read.
        let start = registration.map_or(0, |r| r.floor);
        let last = match n.counter {
            Some(c) => c,
            None => n.items.last().copied().unwrap_or(0).max(start),
        };
        let id = last.max(h.seen) + 1;
        if !n.issued.insert(id) {
            n.reused = true;
        }
        if n.deleted > 0 {
            n.enqueued_after_delete += 1;
        }
        n.items.insert(id);
        n.counter = Some(id);
        n.listed = true;
        n.handles[handle as usize] = Handle {
            seen: h.seen.max(id),
            call: Call::Idle,
        };
        Some(IdReply::Wrote(id))
    }

    /// `queue_delete` with the operator's floor.
    fn queue_delete(&self, n: &mut IdState) -> Option<IdReply> {
        let Deleting::Delete { floor, headroom } = n.deleting else {
            return None;
        };
        if !n.items.is_empty() {
            n.deleting = Deleting::Purge { floor, headroom };
            return Some(IdReply::Busy);
        }
        let last = n.counter.unwrap_or(0);
        if last > floor && !self.faults.delete_without_floor {
            n.deleting = Deleting::Raise {
                want: last.saturating_add(headroom),
                headroom: headroom.saturating_mul(2),
            };
            return Some(IdReply::Behind(last));
        }
        n.counter = None;
        n.listed = false;
        n.generation += 1;
        n.deleting = Deleting::Idle;
        n.deleted += 1;
        Some(IdReply::Deleted)
    }

    /// Renders `actions` from the start, one step per line, then the end
    /// state.
    pub fn trace(&self, actions: &[IdAction]) -> String {
        let mut out = String::new();
        let mut s = self.initial();
        for (k, &a) in actions.iter().enumerate() {
            let Some((next, reply)) = self.step(&s, a) else {
                let _ = writeln!(out, "{:>3}. {a:?}  (not enabled)", k + 1);
                break;
            };
            let _ = writeln!(
                out,
                "{:>3}. {} -> {}",
                k + 1,
                id_call(&s, a),
                id_reply(&reply)
            );
            s = next;
        }
        let _ = writeln!(
            out,
            "     end: items {:?}, counter {:?}, floor {}, generation {}, ids handed out {:?}{}",
            s.items,
            s.counter,
            s.floor,
            s.generation,
            s.issued,
            if s.reused { ", an id REUSED" } else { "" }
        );
        out
    }
}

/// A purge: every item deleted (the batches of one purge, at once).
fn purge(n: &mut IdState) -> usize {
    let purged = n.items.len();
    n.items.clear();
    purged
}

fn id_call(s: &IdState, a: IdAction) -> String {
    match a {
        IdAction::Enqueue { handle } => {
            let h = s.handles[handle as usize];
            let with = match h.call {
                Call::Registered(r) => format!(
                    " with registration (generation {}, floor {})",
                    r.generation, r.floor
                ),
                _ => String::new(),
            };
            format!("h{handle} enqueue (seen {}){with}", h.seen)
        }
        IdAction::Register { handle } => format!("h{handle} register"),
        IdAction::Restart { handle } => format!("h{handle} restarts"),
        IdAction::Purge => "op purge".to_string(),
        IdAction::DeleteStart => "op delete_queue: purge".to_string(),
        IdAction::DeletePurge => "op delete_queue: purge again".to_string(),
        IdAction::QueueDelete => match s.deleting {
            Deleting::Delete { floor, .. } => format!("op queue_delete(floor {floor})"),
            _ => "op queue_delete".to_string(),
        },
        IdAction::RaiseFloor => match s.deleting {
            Deleting::Raise { want, .. } => format!("op raise the floor to {want}"),
            _ => "op raise the floor".to_string(),
        },
    }
}

fn id_reply(r: &IdReply) -> String {
    match r {
        IdReply::Wrote(id) => format!("id {id}"),
        IdReply::Unregistered(g) => format!("unregistered (generation {g})"),
        IdReply::Floor(f) => format!("floor {f}"),
        IdReply::Purged(k) => format!("{k} purged"),
        IdReply::Busy => "busy".to_string(),
        IdReply::Behind(last) => format!("behind (last id {last})"),
        IdReply::Deleted => "deleted".to_string(),
        IdReply::Nothing => "-".to_string(),
    }
}

impl Model for IdModel {
    type State = IdState;
    type Action = IdAction;

    fn init_states(&self) -> Vec<IdState> {
        vec![self.initial()]
    }

    fn actions(&self, s: &IdState, actions: &mut Vec<IdAction>) {
        for (h, handle) in s.handles.iter().enumerate() {
            let handle_no = h as u8;
            match handle.call {
                Call::Unregistered(_) => actions.push(IdAction::Register { handle: handle_no }),
                Call::Idle | Call::Registered(_) => {
                    actions.push(IdAction::Enqueue { handle: handle_no })
                }
            }
            actions.push(IdAction::Restart { handle: handle_no });
        }
        actions.push(IdAction::Purge);
        match s.deleting {
            Deleting::Idle => actions.push(IdAction::DeleteStart),
            Deleting::Purge { .. } => actions.push(IdAction::DeletePurge),
            Deleting::Delete { .. } => actions.push(IdAction::QueueDelete),
            Deleting::Raise { .. } => actions.push(IdAction::RaiseFloor),
        }
    }

    fn next_state(&self, s: &IdState, a: IdAction) -> Option<IdState> {
        self.step(s, a).map(|(n, _)| n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let all = vec![
            Property::<Self>::always(IDS_UNIQUE, |_, s| !s.reused),
            Property::<Self>::sometimes(ENQUEUE_AFTER_DELETE, |_, s| s.enqueued_after_delete > 0),
            Property::<Self>::sometimes(FLOOR_RAISED_AGAIN, |_, s| s.raises >= 2),
        ];
        match self.only {
            Some(name) => all.into_iter().filter(|p| p.name == name).collect(),
            None => all,
        }
    }
}

impl Focus for IdModel {
    fn only(mut self, name: &'static str) -> Self {
        self.only = Some(name);
        self
    }
}
