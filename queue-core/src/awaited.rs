//! What a producer waiting on one item saw ([`Awaited`]).

use crate::{Finished, ItemInfo};

/// The answer of [`crate::BackendExt::wait_finished`]: how the item stood
/// when the wait ended.
///
/// ```
/// use leaseq_core::{Awaited, Backend, BackendExt, ItemId, QueueName};
/// use std::time::Duration;
///
/// async fn report(backend: &dyn Backend, q: &QueueName, id: ItemId) -> leaseq_core::Result<()> {
///     match backend.wait_finished(q, id, Duration::from_secs(30)).await? {
///         Awaited::Finished(done) => println!("{:?} with {:?}", done.ending, done.result),
///         Awaited::Dead(letter) => println!("dead: {:?}", letter.last_error),
///         Awaited::Pending => println!("still waiting or running after 30 s"),
///         _ => println!("an answer this version does not know"),
///     }
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Awaited {
    /// It finished and the queue kept it: the record, with the handler's
    /// result.
    Finished(Finished),
    /// It went Dead: a dead letter in the queue, as
    /// [`Backend::item`](crate::Backend::item) shows it (`last_error` says
    /// why). It may still be redriven.
    Dead(ItemInfo),
    /// The timeout passed with the item still waiting (Ready or Scheduled)
    /// or Leased.
    Pending,
}

impl Awaited {
    /// The kept record when the item finished; `None` otherwise.
    pub fn finished(self) -> Option<Finished> {
        match self {
            Awaited::Finished(done) => Some(done),
            _ => None,
        }
    }

    /// True when the timeout passed with the item still in the queue and
    /// not Dead.
    pub fn is_pending(&self) -> bool {
        matches!(self, Awaited::Pending)
    }
}
