//! What a check reports: passed, skipped (and why), or the rule it caught a
//! backend breaking, with the evidence.

use std::fmt;

use leaseq_core::Error;

/// The rule a check proves: one of the invariants INV-1 … INV-10 of the
/// contract, or a plain clause of a method's contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    /// INV-1 single home: each live id is in exactly one state index; Ready
    /// never holds a duplicate.
    Inv1,
    /// INV-2 mutual exclusion: at most one live lease per item.
    Inv2,
    /// INV-3 fencing: a stale token gets `LeaseLost` and changes nothing.
    Inv3,
    /// INV-4 exactly-once recovery: concurrent reapers requeue each expired
    /// lease once.
    Inv4,
    /// INV-5 no loss: every enqueued item ends acked or Dead, exactly once.
    Inv5,
    /// INV-6 self-healing: a dangling or corrupt index entry is removed on
    /// contact and never fails or stalls a claim.
    Inv6,
    /// INV-7 bounded GC: reap cost grows with expired leases, not live ones.
    Inv7,
    /// INV-8 order: FIFO within a priority, higher priority first.
    Inv8,
    /// INV-9 dedup: one dedup key, one item, even under concurrency.
    Inv9,
    /// INV-10 no redelivery after ack.
    Inv10,
    /// A clause of one method's `# Contract` (the method is named).
    Contract(&'static str),
    /// The backend panicked in a call (seen when a task of the check
    /// panics): every call answers, with an error if need be.
    Panic,
}

impl Rule {
    /// The invariant's number (1 … 10), or `None` for a plain contract clause.
    pub fn invariant(self) -> Option<u8> {
        Some(match self {
            Rule::Inv1 => 1,
            Rule::Inv2 => 2,
            Rule::Inv3 => 3,
            Rule::Inv4 => 4,
            Rule::Inv5 => 5,
            Rule::Inv6 => 6,
            Rule::Inv7 => 7,
            Rule::Inv8 => 8,
            Rule::Inv9 => 9,
            Rule::Inv10 => 10,
            Rule::Contract(_) | Rule::Panic => return None,
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.invariant(), self) {
            (Some(n), _) => write!(f, "INV-{n}"),
            (None, Rule::Contract(what)) => write!(f, "contract of {what}"),
            (None, Rule::Panic) => f.write_str("no panics"),
            (None, _) => f.write_str("contract"),
        }
    }
}

/// A check that held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The backend kept the rule.
    Passed,
    /// The check could not run on this backend (a capability or test hook
    /// it lacks); the reason says which. Never a silent pass: the runner
    /// prints it.
    Skipped(String),
    /// The factory produced no backend (e.g. no server reachable). The
    /// runner prints it, or fails when `CI=true`.
    Unavailable(String),
}

/// A rule the backend broke, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule broken.
    pub rule: Rule,
    /// What was seen, in words.
    pub message: String,
}

impl Violation {
    /// A violation of `rule`.
    pub fn new(rule: Rule, message: impl Into<String>) -> Self {
        Violation {
            rule,
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.rule {
            Rule::Panic => write!(f, "the backend panicked: {}", self.message),
            rule => write!(f, "{rule} violated: {}", self.message),
        }
    }
}

impl std::error::Error for Violation {}

/// What every check returns.
pub type CheckResult = Result<Outcome, Violation>;

/// Turns an unexpected backend error into a violation of the rule at hand.
pub(crate) trait OrFail<T> {
    /// `Err(e)` becomes a violation of `rule` saying what was being done.
    fn or_fail(self, rule: Rule, doing: &str) -> Result<T, Violation>;
}

impl<T> OrFail<T> for Result<T, Error> {
    fn or_fail(self, rule: Rule, doing: &str) -> Result<T, Violation> {
        self.map_err(|e| Violation::new(rule, format!("{doing} failed unexpectedly: {e}")))
    }
}

/// Fails with `rule` and the formatted message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $rule:expr, $($msg:tt)+) => {
        if !$cond {
            return Err($crate::Violation::new($rule, format!($($msg)+)));
        }
    };
}
pub(crate) use ensure;
