//! Paging through a list the backend answers only from its start (`peek`,
//! `finished`): a page is the tail of a longer read, with one item more to
//! tell whether a next page exists.

use leaseq_core::Error;

use crate::app::ApiError;

/// Items listed when the page does not say.
const DEFAULT_LIST: usize = 50;
/// The most items one list request returns.
const MAX_LIST: usize = 500;
/// Paging reaches this far: the most one `peek` or `finished` returns.
pub(crate) const MAX_OFFSET: usize = leaseq_core::limits::MAX_PEEK;

/// One page's place in a list.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Page {
    pub(crate) offset: usize,
    pub(crate) limit: usize,
}

impl Page {
    /// The page asked for; an offset past [`MAX_OFFSET`] is a 400 naming
    /// `what` is paged.
    pub(crate) fn new(
        offset: Option<usize>,
        limit: Option<usize>,
        what: &str,
    ) -> Result<Self, ApiError> {
        let limit = limit.unwrap_or(DEFAULT_LIST).clamp(1, MAX_LIST);
        let offset = offset.unwrap_or(0);
        if offset >= MAX_OFFSET {
            return Err(Error::invalid(format!(
                "the dashboard pages through the first {MAX_OFFSET} {what} \
                 (the most one read returns)"
            ))
            .into());
        }
        Ok(Self { offset, limit })
    }

    /// How many to read from the start: this page and one more.
    pub(crate) fn want(&self) -> usize {
        (self.offset + self.limit + 1).min(MAX_OFFSET)
    }

    /// This page's items out of those read, and whether more follow.
    pub(crate) fn cut<'a, T>(&self, read: &'a [T]) -> (&'a [T], bool) {
        let more = read.len() > self.offset + self.limit;
        let from = self.offset.min(read.len());
        let to = (self.offset + self.limit).min(read.len());
        (&read[from..to], more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_a_window_and_knows_whether_more_follow() {
        let read: Vec<u32> = (0..7).collect();
        let page = Page::new(Some(2), Some(3), "items").expect("page");
        assert_eq!(page.want(), 6);
        assert_eq!(page.cut(&read), (&read[2..5], true));
        let last = Page::new(Some(5), Some(3), "items").expect("page");
        assert_eq!(last.cut(&read), (&read[5..7], false));
        let past = Page::new(Some(9), Some(3), "items").expect("page");
        assert_eq!(past.cut(&read), (&read[7..7], false));
        assert!(Page::new(Some(MAX_OFFSET), None, "items").is_err());
    }
}
