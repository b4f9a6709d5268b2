//! What the cost checks share ([`super::reap_cost`],
//! [`super::collect_cost`]): two backends from the factory, one small and
//! one large, and an operation timed on both in interleaved rounds, so a
//! load spike on a shared machine hits both; their medians are compared
//! with a generous factor, and only a ratio over it in every one of a few
//! measurements fails. No hook can count the rows a statement visits or
//! the entries a script reads, so the cost is measured, not counted.

use std::future::Future;
use std::time::Duration;

use crate::cx::{run, Cx, Needs};
use crate::{scale, BackendFactory, CheckResult, Outcome, Rule, Violation};

/// Timed operations per backend in one measurement (odd: one median),
/// times [`scale`].
const ROUNDS: u32 = 151;
/// Untimed operations per backend first (connections, caches, plans).
const WARMUP: u32 = 20;
/// Measurements; a check fails only if every one is over the factor.
pub(crate) const ATTEMPTS: usize = 3;
/// How much slower the large backend's median may be. A correct operation
/// measures about 1x; one that visits what it should leave alone measures
/// 20x or more at the checks' sizes, even in memory.
pub(crate) const FACTOR: f64 = 5.0;

/// Runs `body` on two backends of `factory`: the first it gets is the
/// large side, the second (`small_side` names it in a violation) the
/// small one.
pub(crate) async fn on_two_backends<F, Fut>(
    factory: &dyn BackendFactory,
    check: &str,
    rule: Rule,
    needs: Needs,
    small_side: &str,
    body: F,
) -> CheckResult
where
    F: FnOnce(Cx, Cx) -> Fut,
    Fut: Future<Output = Result<(), Violation>>,
{
    run(factory, check, rule, needs, |large| async move {
        let small = run(factory, check, rule, needs, |small| body(small, large)).await?;
        match small {
            Outcome::Passed => Ok(()),
            other => Err(Violation::new(
                rule,
                format!(
                    "the factory's second backend (for the {small_side} side) did not run: {other:?}"
                ),
            )),
        }
    })
    .await
}

/// One operation a cost check times.
pub(crate) trait Timed {
    /// Runs the operation once on `cx`, which holds `size` of what it must
    /// leave alone, checks that it left it alone, and answers how long it
    /// took.
    async fn time(&self, cx: &Cx, size: usize) -> Result<Duration, Violation>;
}

/// The medians of interleaved runs of `op` on `small` (holding
/// `sizes.0`) and `large` (holding `sizes.1`). `Ok(None)` once a
/// measurement is within [`FACTOR`]; otherwise every measurement ("large
/// vs small (ratio)") and the rounds each took, for the check's violation.
pub(crate) async fn compare(
    op: &impl Timed,
    small: &Cx,
    large: &Cx,
    sizes: (usize, usize),
) -> Result<Option<(Vec<String>, u32)>, Violation> {
    let (s_size, l_size) = sizes;
    for _ in 0..WARMUP {
        op.time(small, s_size).await?;
        op.time(large, l_size).await?;
    }
    let rounds = ROUNDS * scale();
    let mut seen = Vec::with_capacity(ATTEMPTS);
    for _ in 0..ATTEMPTS {
        let (mut s, mut l) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            // Alternate which goes first, so neither always follows the other.
            if round % 2 == 0 {
                s.push(op.time(small, s_size).await?);
                l.push(op.time(large, l_size).await?);
            } else {
                l.push(op.time(large, l_size).await?);
                s.push(op.time(small, s_size).await?);
            }
        }
        let (s, l) = (median(&mut s), median(&mut l));
        let ratio = l.as_secs_f64() / s.as_secs_f64().max(1e-9);
        if ratio <= FACTOR {
            return Ok(None);
        }
        seen.push(format!("{l:?} vs {s:?} ({ratio:.1}x)"));
    }
    Ok(Some((seen, rounds)))
}

/// The median of `times` (sorted in place).
fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times.get(times.len() / 2).copied().unwrap_or_default()
}
