//! The queue listing with its generation counter, as Redis runs it
//! (backend-redis/src/listing.rs), abstractly: one queue, the registry's
//! field for it, enqueues that register it, consumers that empty it, and
//! listings that prune it when they find it empty.
//!
//! - An enqueue script writes its item when the queue is `listed`, or when
//!   its call holds a registration of the current prune generation (then it
//!   sets `listed` to the registration's token); else it answers
//!   `unregistered` with the generation, and the call writes a fresh token
//!   into the registry field (`queues_register.lua`) and sends the script
//!   again.
//! - A listing reads the registry field, then prunes in the queue's place
//!   (`queue_prune.lua`: at zero items it deletes `listed` and raises the
//!   generation), then drops the field if it still holds the token it read
//!   (`queues_registry.lua drop`). It answers the queue when the prune
//!   counted items.
//!
//! Each step is one script (one atomic step). "Settled" means no enqueue
//! call and no listing is between its steps.

use std::fmt::Write;

use stateright::{Model, Property};

use crate::check::Focus;

/// A queue that holds items is never hidden: once the racing steps settle,
/// its registry field is there, so the next listing counts it.
pub const NEVER_HIDDEN: &str = "the listing never hides a queue that holds items";
/// No phantom kept: once settled, the next listing of an empty queue
/// neither answers it nor keeps its field. (It holds by the prune's
/// construction, counting in the queue's own place; checked so that a
/// change to the steps that broke it would be found.)
pub const NO_PHANTOM: &str = "the listing keeps no phantom";
/// Reachable (an example): an enqueue's registration is refused for its
/// generation. Shows the race with a prune is explored.
pub const REGISTRATION_REFUSED: &str = "a registration is refused for its generation";

/// The size of the listing's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListingBounds {
    /// Enqueuing callers.
    pub enqueuers: u8,
    /// Enqueue calls, in total (one item each).
    pub enqueues: u8,
    /// Registrations, in total (each call makes at most
    /// `MAX_REGISTRATIONS`; here a bound on all).
    pub registrations: u8,
    /// Listing callers.
    pub listers: u8,
    /// Listings, in total.
    pub listings: u8,
}

impl ListingBounds {
    /// The bounds CI checks: 2 enqueuers, 4 enqueues, 5 registrations, 2
    /// listers, 4 listings.
    pub fn ci() -> Self {
        ListingBounds {
            enqueuers: 2,
            enqueues: 4,
            registrations: 5,
            listers: 2,
            listings: 4,
        }
    }

    /// The larger bounds behind `LEASEQ_MODEL_BIG=1`: a third enqueuer
    /// (about 15 times the states).
    pub fn big() -> Self {
        ListingBounds {
            enqueuers: 3,
            ..ListingBounds::ci()
        }
    }
}

/// Faults seeded into the listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ListingFaults {
    /// The enqueue script accepts a registration of any generation (the
    /// first draft's listing, with no prune generation).
    pub without_generation: bool,
}

/// Where an enqueue call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Enqueuing {
    /// No call in flight.
    Idle,
    /// The script answered `unregistered` naming this generation; next:
    /// register.
    Unregistered(u8),
    /// Registered under `token` in `generation`; next: the script again.
    Registered {
        /// The token it wrote to the registry.
        token: u8,
        /// The generation the script named.
        generation: u8,
    },
}

/// Where a listing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Listing {
    /// No listing in flight.
    Idle,
    /// The registry read the field holding this token; next: the prune.
    Read(u8),
    /// The prune found the queue empty; next: drop the field if it still
    /// holds this token.
    Drop(u8),
}

/// The listing's state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListingState {
    /// Items the queue holds.
    pub items: u8,
    /// `listed`: the token the queue was registered under, if present.
    pub listed: Option<u8>,
    /// The prune generation (`listgen`).
    pub generation: u8,
    /// The registry's field for the queue: the token it holds.
    pub registry: Option<u8>,
    /// Tokens handed out (the next one is fresh).
    pub tokens: u8,
    /// The enqueue calls.
    pub enqueuers: Vec<Enqueuing>,
    /// The listings.
    pub listers: Vec<Listing>,
    /// Enqueue calls still allowed.
    pub enqueues_left: u8,
    /// Listings still allowed.
    pub listings_left: u8,
    /// Ghost: a script refused a registration for its generation.
    pub refused: bool,
}

impl ListingState {
    /// No enqueue call and no listing between its steps.
    pub fn settled(&self) -> bool {
        self.enqueuers.iter().all(|e| *e == Enqueuing::Idle)
            && self.listers.iter().all(|l| *l == Listing::Idle)
    }

    /// A listing run alone from here, to its end: whether it answers the
    /// queue, and the state it leaves.
    pub fn list_alone(&self) -> (bool, ListingState) {
        let mut n = self.clone();
        let Some(token) = n.registry else {
            return (false, n);
        };
        if n.items > 0 {
            return (true, n);
        }
        prune(&mut n);
        drop_field(&mut n, token);
        (false, n)
    }
}

/// One step of the listing's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListingAction {
    /// The enqueue script for one item.
    Enqueue {
        /// The enqueuer.
        enqueuer: u8,
    },
    /// `queues_register`: a fresh token into the registry field.
    Register {
        /// The enqueuer.
        enqueuer: u8,
    },
    /// A consumer acks an item.
    Ack,
    /// A listing reads the registry.
    Read {
        /// The lister.
        lister: u8,
    },
    /// `queue_prune`: counts the queue's items; at zero, deletes `listed`
    /// and raises the generation.
    Prune {
        /// The lister.
        lister: u8,
    },
    /// `queues_registry drop`: the field goes if it still holds the token
    /// read.
    Drop {
        /// The lister.
        lister: u8,
    },
}

/// The listing's protocol as a [`stateright::Model`].
#[derive(Debug, Clone)]
pub struct ListingModel {
    /// The configuration's size.
    pub bounds: ListingBounds,
    /// Seeded faults.
    pub faults: ListingFaults,
    only: Option<&'static str>,
}

fn prune(n: &mut ListingState) {
    n.listed = None;
    n.generation += 1;
}

fn drop_field(n: &mut ListingState, token: u8) {
    if n.registry == Some(token) {
        n.registry = None;
    }
}

impl ListingModel {
    /// The protocol as the code has it, at `bounds`.
    pub fn new(bounds: ListingBounds) -> Self {
        ListingModel {
            bounds,
            faults: ListingFaults::default(),
            only: None,
        }
    }

    /// With `faults` seeded.
    #[must_use]
    pub fn faults(mut self, faults: ListingFaults) -> Self {
        self.faults = faults;
        self
    }

    /// The start: a queue that never had an item.
    pub fn initial(&self) -> ListingState {
        let b = &self.bounds;
        ListingState {
            items: 0,
            listed: None,
            generation: 0,
            registry: None,
            tokens: 0,
            enqueuers: vec![Enqueuing::Idle; b.enqueuers as usize],
            listers: vec![Listing::Idle; b.listers as usize],
            enqueues_left: b.enqueues,
            listings_left: b.listings,
            refused: false,
        }
    }

    /// Applies `a` to `s`: the next state and what the step answered, or
    /// `None` when it is not enabled.
    pub fn step(&self, s: &ListingState, a: ListingAction) -> Option<(ListingState, String)> {
        let mut n = s.clone();
        let answer = match a {
            ListingAction::Enqueue { enqueuer } => {
                let e = n.enqueuers[enqueuer as usize];
                if e == Enqueuing::Idle {
                    if n.enqueues_left == 0 {
                        return None;
                    }
                    n.enqueues_left -= 1;
                }
                let admitted = match e {
                    _ if n.listed.is_some() => true,
                    Enqueuing::Registered { token, generation }
                        if generation == n.generation || self.faults.without_generation =>
                    {
                        n.listed = Some(token);
                        true
                    }
                    Enqueuing::Registered { .. } => {
                        n.refused = true;
                        false
                    }
                    _ => false,
                };
                if admitted {
                    n.items += 1;
                    n.enqueuers[enqueuer as usize] = Enqueuing::Idle;
                    "item written".to_string()
                } else {
                    n.enqueuers[enqueuer as usize] = Enqueuing::Unregistered(n.generation);
                    format!("unregistered (generation {})", n.generation)
                }
            }
            ListingAction::Register { enqueuer } => {
                let Enqueuing::Unregistered(generation) = n.enqueuers[enqueuer as usize] else {
                    return None;
                };
                if n.tokens >= self.bounds.registrations {
                    return None;
                }
                let token = n.tokens;
                n.tokens += 1;
                n.registry = Some(token);
                n.enqueuers[enqueuer as usize] = Enqueuing::Registered { token, generation };
                format!("field := T{token}")
            }
            ListingAction::Ack => {
                n.items = n.items.checked_sub(1)?;
                format!("{} left", n.items)
            }
            ListingAction::Read { lister } => {
                if n.listers[lister as usize] != Listing::Idle || n.listings_left == 0 {
                    return None;
                }
                n.listings_left -= 1;
                match n.registry {
                    // Nothing registered: the listing is over, the queue
                    // not in it.
                    None => "no field: not listed".to_string(),
                    Some(token) => {
                        n.listers[lister as usize] = Listing::Read(token);
                        format!("field T{token}")
                    }
                }
            }
            ListingAction::Prune { lister } => {
                let Listing::Read(token) = n.listers[lister as usize] else {
                    return None;
                };
                if n.items > 0 {
                    n.listers[lister as usize] = Listing::Idle;
                    format!("{} items: listed", n.items)
                } else {
                    prune(&mut n);
                    n.listers[lister as usize] = Listing::Drop(token);
                    format!("empty: listed deleted, generation -> {}", n.generation)
                }
            }
            ListingAction::Drop { lister } => {
                let Listing::Drop(token) = n.listers[lister as usize] else {
                    return None;
                };
                let before = n.registry;
                drop_field(&mut n, token);
                n.listers[lister as usize] = Listing::Idle;
                if before == n.registry {
                    "field kept: not listed".to_string()
                } else {
                    "field dropped: not listed".to_string()
                }
            }
        };
        Some((n, answer))
    }

    /// Renders `actions` from the start, one step per line, then the end
    /// state.
    pub fn trace(&self, actions: &[ListingAction]) -> String {
        let mut out = String::new();
        let mut s = self.initial();
        for (k, &a) in actions.iter().enumerate() {
            let Some((next, answer)) = self.step(&s, a) else {
                let _ = writeln!(out, "{:>3}. {a:?}  (not enabled)", k + 1);
                break;
            };
            let _ = writeln!(out, "{:>3}. {} -> {answer}", k + 1, listing_call(&s, a));
            s = next;
        }
        let field = s.registry.map_or("none".to_string(), |t| format!("T{t}"));
        let _ = writeln!(
            out,
            "     end: {} items, registry field {field}, listed {:?}, generation {}{}",
            s.items,
            s.listed,
            s.generation,
            if s.settled() { ", settled" } else { "" }
        );
        out
    }
}

fn listing_call(s: &ListingState, a: ListingAction) -> String {
    match a {
        ListingAction::Enqueue { enqueuer } => match s.enqueuers[enqueuer as usize] {
            Enqueuing::Registered { token, generation } => {
                format!("e{enqueuer} enqueue with (T{token}, generation {generation})")
            }
            _ => format!("e{enqueuer} enqueue"),
        },
        ListingAction::Register { enqueuer } => format!("e{enqueuer} register"),
        ListingAction::Ack => "ack".to_string(),
        ListingAction::Read { lister } => format!("l{lister} read the registry"),
        ListingAction::Prune { lister } => format!("l{lister} queue_prune"),
        ListingAction::Drop { lister } => match s.listers[lister as usize] {
            Listing::Drop(t) => format!("l{lister} drop the field if T{t}"),
            _ => format!("l{lister} drop"),
        },
    }
}

impl Model for ListingModel {
    type State = ListingState;
    type Action = ListingAction;

    fn init_states(&self) -> Vec<ListingState> {
        vec![self.initial()]
    }

    fn actions(&self, s: &ListingState, actions: &mut Vec<ListingAction>) {
        for (e, phase) in s.enqueuers.iter().enumerate() {
            let enqueuer = e as u8;
            match phase {
                Enqueuing::Unregistered(_) => actions.push(ListingAction::Register { enqueuer }),
                _ => actions.push(ListingAction::Enqueue { enqueuer }),
            }
        }
        if s.items > 0 {
            actions.push(ListingAction::Ack);
        }
        for (l, phase) in s.listers.iter().enumerate() {
            let lister = l as u8;
            actions.push(match phase {
                Listing::Idle => ListingAction::Read { lister },
                Listing::Read(_) => ListingAction::Prune { lister },
                Listing::Drop(_) => ListingAction::Drop { lister },
            });
        }
    }

    fn next_state(&self, s: &ListingState, a: ListingAction) -> Option<ListingState> {
        self.step(s, a).map(|(n, _)| n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let all = vec![
            Property::<Self>::always(NEVER_HIDDEN, |_, s| {
                !s.settled() || s.items == 0 || s.registry.is_some()
            }),
            Property::<Self>::always(NO_PHANTOM, |_, s| {
                if !s.settled() {
                    return true;
                }
                let (answered, after) = s.list_alone();
                s.items > 0 || (!answered && after.registry.is_none())
            }),
            Property::<Self>::sometimes(REGISTRATION_REFUSED, |_, s| s.refused),
        ];
        match self.only {
            Some(name) => all.into_iter().filter(|p| p.name == name).collect(),
            None => all,
        }
    }
}

impl Focus for ListingModel {
    fn only(mut self, name: &'static str) -> Self {
        self.only = Some(name);
        self
    }
}
