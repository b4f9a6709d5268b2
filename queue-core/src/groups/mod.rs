//! The optional groups of the contract: surfaces a backend offers whole or
//! not at all, beside the required core ([`Backend`]).
//!
//! | group | trait | what it is for |
//! |---|---|---|
//! | operator actions | [`Admin`] | redrive, redrive one, remove one, purge, delete a queue |
//! | throttles | [`Throttles`] | global concurrency and rate limits per queue |
//! | schedules | [`ScheduleStore`] | periodic jobs, one item per tick |
//! | control | [`Control`] | cancel, pause and resume, snooze, run now, progress |
//! | live workers | [`WorkerRegistry`] | who runs what, with a heartbeat |
//! | history | [`History`] | finished items kept per queue, results, waiting for an ending |
//! | events | [`Events`] | live job events per queue, at most once |
//! | test hooks | [`TestHooks`] | planting stale and corrupt state, for the suite only |
//!
//! A backend says which groups it offers in [`Backend::groups`]; callers
//! reach them through it, or through [`crate::BackendExt::admin`] and its
//! siblings, which name the missing group in an
//! [`Error::Unsupported`](crate::Error::Unsupported):
//!
//! ```
//! use leaseq_core::{Backend, BackendExt, QueueName};
//!
//! async fn empty(b: &dyn Backend, queue: &QueueName) -> leaseq_core::Result<u64> {
//!     b.admin()?.purge(queue).await
//! }
//! ```
//!
//! Every method of a group is required, so a backend cannot offer half of
//! one, and a method added to a group fails every backend's build until it
//! is written.

mod admin;
mod control;
mod events;
mod history;
mod registry;
mod schedules;
mod throttles;

pub use admin::Admin;
pub use control::Control;
pub use events::Events;
pub use history::{History, FINISHED_POLL};
pub use registry::{RunningJob, WorkerEntry, WorkerRegistry};
pub use schedules::ScheduleStore;
pub use throttles::Throttles;

use std::fmt;

use crate::testing::TestHooks;
#[cfg(doc)]
use crate::Backend;

/// The optional groups one backend offers: each is `Some` when offered.
/// Built readably, with only what the backend has:
///
/// ```
/// use leaseq_core::Groups;
/// let none = Groups::none();
/// assert!(none.admin.is_none() && none.test_hooks.is_none());
/// ```
///
/// A backend that offers operator actions and throttles writes
/// `Groups::none().admin(self).throttles(self)` in [`Backend::groups`].
#[derive(Clone, Copy, Default)]
#[non_exhaustive]
pub struct Groups<'a> {
    /// Operator actions.
    pub admin: Option<&'a dyn Admin>,
    /// Queue limits.
    pub throttles: Option<&'a dyn Throttles>,
    /// Periodic schedules.
    pub schedules: Option<&'a dyn ScheduleStore>,
    /// Control of running work.
    pub control: Option<&'a dyn Control>,
    /// Live workers.
    pub registry: Option<&'a dyn WorkerRegistry>,
    /// Finished items.
    pub history: Option<&'a dyn History>,
    /// Live job events.
    pub events: Option<&'a dyn Events>,
    /// Hooks that let the conformance suite plant stale or corrupt state.
    /// `None` unless the backend was built for tests (each backend says
    /// how: a constructor or an option the test factory sets, never a
    /// default), so a production handle cannot expire live leases or plant
    /// entries.
    pub test_hooks: Option<&'a dyn TestHooks>,
}

impl<'a> Groups<'a> {
    /// No group: the core alone.
    #[must_use]
    pub const fn none() -> Self {
        Groups {
            admin: None,
            throttles: None,
            schedules: None,
            control: None,
            registry: None,
            history: None,
            events: None,
            test_hooks: None,
        }
    }

    /// With operator actions.
    #[must_use]
    pub fn admin(mut self, admin: &'a dyn Admin) -> Self {
        self.admin = Some(admin);
        self
    }

    /// With queue limits.
    #[must_use]
    pub fn throttles(mut self, throttles: &'a dyn Throttles) -> Self {
        self.throttles = Some(throttles);
        self
    }

    /// With periodic schedules.
    #[must_use]
    pub fn schedules(mut self, schedules: &'a dyn ScheduleStore) -> Self {
        self.schedules = Some(schedules);
        self
    }

    /// With control of running work.
    #[must_use]
    pub fn control(mut self, control: &'a dyn Control) -> Self {
        self.control = Some(control);
        self
    }

    /// With the live-worker registry.
    #[must_use]
    pub fn registry(mut self, registry: &'a dyn WorkerRegistry) -> Self {
        self.registry = Some(registry);
        self
    }

    /// With finished items.
    #[must_use]
    pub fn history(mut self, history: &'a dyn History) -> Self {
        self.history = Some(history);
        self
    }

    /// With live job events.
    #[must_use]
    pub fn events(mut self, events: &'a dyn Events) -> Self {
        self.events = Some(events);
        self
    }

    /// With test hooks, when `hooks` is `Some`.
    #[must_use]
    pub fn test_hooks(mut self, hooks: Option<&'a dyn TestHooks>) -> Self {
        self.test_hooks = hooks;
        self
    }

    /// The groups offered, by name, and those not offered: what the suite
    /// prints when it skips a group.
    pub fn offered(&self) -> [(&'static str, bool); 8] {
        [
            ("admin", self.admin.is_some()),
            ("throttles", self.throttles.is_some()),
            ("schedules", self.schedules.is_some()),
            ("control", self.control.is_some()),
            ("registry", self.registry.is_some()),
            ("history", self.history.is_some()),
            ("events", self.events.is_some()),
            ("test_hooks", self.test_hooks.is_some()),
        ]
    }
}

impl fmt::Debug for Groups<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let offered: Vec<&str> = self
            .offered()
            .into_iter()
            .filter_map(|(name, yes)| yes.then_some(name))
            .collect();
        f.debug_tuple("Groups").field(&offered).finish()
    }
}
