//! The seeded bugs, one per class of mistake.

/// A mistake seeded into a [`crate::NaiveBackend`], or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bug {
    /// No bug: the backend keeps the contract.
    #[default]
    None,
    /// Queues not isolated: dedup keys live in one map for the whole
    /// backend, so a key held in one queue deduplicates another's item.
    SharedDedupKeys,
    /// A coarse clock: `now` ticks once a second.
    SecondsClock,
    /// A reap leaves a stray Ready entry with no item behind each lease it
    /// recovers; the next claim or reap removes it and reports a repair.
    StrayEntryAfterReap,
    /// The reaper walks every live lease of the queue to find the expired
    /// ones, instead of reading the expiry-ordered index up to now.
    ScanningReap,
    /// A release puts the item at the back of its priority (a fresh place
    /// in claim order) instead of at its place by enqueue order.
    ReleaseToBack,
    /// A peek returns as many items as asked, past `MAX_PEEK`.
    UncappedPeek,
    /// A claim reads the clock, then takes the lock a round trip later:
    /// its leases are stamped with a time from before the step.
    ClockReadOutsideStep,
    /// The `expire_leases` hook rewrites every lease's expiry to now,
    /// already-expired ones included, and counts them all.
    ExpireHookTouchesExpired,
    /// A reap moves an expired item to Ready but leaves its entry in the
    /// Leased index, so the next reap finds it again.
    ReapLeavesLeasedEntry,
}
