//! The completion counter the collector reads: how many kept Completed
//! items of a queue finished within a sample's window, from the queue's
//! history. A queue that keeps no completed items has no counter: its
//! completions leave no trace, and the page says so instead of guessing.

use leaseq_core::limits::MAX_PEEK;
use leaseq_core::{Backend, BackendExt as _, Ending, QueueName, Result};

/// The first read's length; it doubles while every item read is in the
/// window, so a tick costs what finished in it.
const FIRST_READ: usize = 64;

/// Kept Completed items of `queue` whose finish time is in `(since,
/// until]` (ms, the backend's clock), or `None` when the backend keeps no
/// history or the queue keeps no completed items. At most [`MAX_PEEK`]
/// are counted per window: past that, the count is a lower bound; a
/// policy whose `max_count` is smaller than a window's completions, or
/// whose `max_age` is shorter than the window, undercounts too.
pub(crate) async fn completed_between(
    backend: &dyn Backend,
    queue: &QueueName,
    since: u64,
    until: u64,
) -> Result<Option<u32>> {
    let Ok(history) = backend.history() else {
        return Ok(None);
    };
    if !history.retention(queue).await?.completed.keeps_any() {
        return Ok(None);
    }
    let mut limit = FIRST_READ;
    loop {
        // Newest first: the items in the window come before the older ones.
        let kept = history
            .finished(queue, Some(Ending::Completed), limit)
            .await?;
        let older = kept.iter().any(|f| f.finished_at.as_millis() <= since);
        if older || kept.len() < limit || limit >= MAX_PEEK {
            let n = kept
                .iter()
                .filter(|f| (since + 1..=until).contains(&f.finished_at.as_millis()))
                .count();
            return Ok(Some(u32::try_from(n).unwrap_or(u32::MAX)));
        }
        limit = (limit * 2).min(MAX_PEEK);
    }
}
