//! Periodic schedules: stored by name, fired once per tick.

use async_trait::async_trait;

use crate::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use crate::{NewItem, Result};

/// Stored periodic schedules and the atomic step that fires one tick (see
/// [`crate::schedule`]). An optional group: a backend offers it through
/// [`Backend::groups`](crate::Backend::groups), and every method is required.
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// Stores `schedule` under its name: creates it, or replaces the one of
    /// that name. Returns the schedule as stored.
    ///
    /// # Contract
    /// - Checked first with [`Schedule::check`]; bad input writes nothing.
    /// - Created: revision 1, `defined_at` = the backend's now, no last tick.
    /// - Replaced with a different queue, spec or payload: revision + 1,
    ///   `defined_at` = the backend's now, the last tick kept (a changed
    ///   schedule never fires a tick it fired before).
    /// - Put again unchanged: nothing changes (same revision and
    ///   `defined_at`), so every process may put its schedules at start.
    async fn put_schedule(&self, schedule: &Schedule) -> Result<StoredSchedule>;

    /// Removes the schedule; returns whether it existed. Items it enqueued
    /// stay. A fire of any of its revisions is [`Fired::Stale`] from here
    /// on.
    ///
    /// # Contract
    async fn remove_schedule(&self, name: &ScheduleName) -> Result<bool>;

    /// Every stored schedule, by name.
    ///
    /// # Contract
    /// - Sorted by name; what [`ScheduleStore::put_schedule`] stored, with the
    ///   last tick fired.
    async fn schedules(&self) -> Result<Vec<StoredSchedule>>;

    /// Fires one tick of a schedule: the step that makes a periodic job
    /// run once per tick however many schedulers race for it.
    ///
    /// # Contract
    /// In ONE atomic step (one script, one transaction, one critical
    /// section), in this order:
    /// - The schedule is gone or its revision is not `tick.revision`:
    ///   [`Fired::Stale`], nothing written.
    /// - Its last tick is at or after `tick.at`: [`Fired::AlreadyFired`]
    ///   with the last tick, nothing written. This holds whatever became of
    ///   the item of that tick (acked, Dead, purged) and across restarts.
    /// - `tick.at` is after the backend's now ([`Backend::now`](crate::Backend::now); a client's
    ///   clock never decides): [`Fired::NotDue`] with the backend's now,
    ///   nothing written.
    /// - Otherwise `item` is enqueued into the schedule's queue exactly as
    ///   [`Backend::enqueue`](crate::Backend::enqueue) would (dedup and unique-for keys included)
    ///   and the last tick becomes `tick.at`: [`Fired::Enqueued`].
    ///
    /// So any number of concurrent calls for one tick enqueue exactly one
    /// item, and a tick never fires twice. `item` is checked like an
    /// enqueue first (bad input writes nothing). A call whose reply was
    /// lost is safe to send again: it then says `AlreadyFired`.
    async fn fire_schedule(&self, tick: &ScheduleTick, item: NewItem) -> Result<Fired>;
}
