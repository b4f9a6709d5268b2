//! Turning script replies into the core's types.
//!
//! # Field limits
//! The scripts and this decoder agree on what an item may hold (the scripts
//! check it before they lease or requeue an item, and quarantine an item
//! outside it to Dead; see `scripts/common.lua`, `unusable`):
//! - attempts: 0 to [`ATTEMPTS_MAX`] (`i32::MAX`); an item about to be
//!   claimed at most `ATTEMPTS_MAX - 1`, so the claim's + 1 stays in range;
//! - max attempts: 1 to [`MAX_ATTEMPTS_MAX`] (`i32::MAX`, the core's
//!   [`leaseq_core::limits::MAX_ATTEMPTS`]);
//! - priority: any `i32`;
//! - a payload present.
//!
//! A reply outside these limits is [`Error::Corrupt`]; the scripts never
//! send one (a unit test keeps the two sets of numbers equal).

use leaseq_core::{
    Enqueued, Error, ItemId, ItemInfo, ItemState, Lease, LeaseKey, LeaseToken, QueueName, Repair,
    Result, Timestamp,
};

use crate::Reply;

/// The most attempts an item may have recorded (`ATT_MAX` in the scripts).
pub(crate) const ATTEMPTS_MAX: u32 = i32::MAX as u32;
/// The most max attempts an item may have (`MAX_ATT_MAX` in the scripts).
pub(crate) const MAX_ATTEMPTS_MAX: u32 = leaseq_core::limits::MAX_ATTEMPTS;

fn ranged(r: &Reply, what: &str, lo: u32, hi: u32) -> Result<u32> {
    let n = r.int()?;
    u32::try_from(n)
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| Error::Corrupt {
            what: format!("{what} {n} is outside {lo} to {hi}"),
        })
}

fn attempts_of(r: &Reply) -> Result<u32> {
    ranged(r, "attempts", 0, ATTEMPTS_MAX)
}

fn max_attempts_of(r: &Reply) -> Result<u32> {
    ranged(r, "max attempts", 1, MAX_ATTEMPTS_MAX)
}

fn i32_of(r: &Reply) -> Result<i32> {
    i32::try_from(r.int()?).map_err(|_| Error::Corrupt {
        what: format!("priority out of range: {r:?}"),
    })
}

/// Text shown to people (a dedup key, a failure reason): never fails on
/// bytes that are not UTF-8.
fn opt_lossy(r: &Reply) -> Result<Option<String>> {
    match r {
        Reply::Nil => Ok(None),
        _ => Ok(Some(String::from_utf8_lossy(&r.bytes()?).into_owned())),
    }
}

fn state_of(r: &Reply) -> Result<ItemState> {
    r.text()?.parse().map_err(|_| Error::Corrupt {
        what: format!("unknown item state {r:?}"),
    })
}

/// A state name, or nil for none (an item that is gone).
pub(crate) fn opt_state(r: &Reply) -> Result<Option<ItemState>> {
    match r {
        Reply::Nil => Ok(None),
        _ => state_of(r).map(Some),
    }
}

/// `expires_at` less `age` ms (`recover_claim`'s `expires at - enqueued at`;
/// negative only if the server's clock stepped back since the enqueue).
fn enqueued_before(expires_at: u64, age: i64) -> Timestamp {
    let t = i128::from(expires_at) - i128::from(age);
    Timestamp::from_millis(u64::try_from(t.max(0)).unwrap_or(u64::MAX))
}

/// `{ id, token, payload, attempts, max attempts, priority, expires at,
/// expires at - enqueued at }` (`recover_claim`'s rows).
pub(crate) fn lease(queue: &QueueName, r: &Reply) -> Result<Lease> {
    let f = r.tuple(8)?;
    let token: LeaseToken = f[1].text()?.parse().map_err(|_| Error::Corrupt {
        what: format!("bad token in claim reply: {:?}", f[1]),
    })?;
    let expires_at = f[6].uint()?;
    Ok(Lease {
        key: LeaseKey {
            queue: queue.clone(),
            id: ItemId::new(f[0].uint()?),
            token,
        },
        payload: f[2].bytes()?,
        attempts: attempts_of(&f[3])?,
        max_attempts: max_attempts_of(&f[4])?,
        priority: i32_of(&f[5])?,
        expires_at: Timestamp::from_millis(expires_at),
        enqueued_at: enqueued_before(expires_at, f[7].int()?),
    })
}

/// A record's number field: decimal digits (and a leading `-`), as the
/// scripts write them.
fn record_int(field: &[u8], what: &str, record: &[u8]) -> Result<i64> {
    std::str::from_utf8(field)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| Error::Corrupt {
            what: format!(
                "item record {:?}: {what} is not a number",
                String::from_utf8_lossy(&record[..record.len().min(60)])
            ),
        })
}

/// An attempt count from a reply, within the limits.
pub(crate) fn attempts(r: &Reply) -> Result<u32> {
    attempts_of(r)
}

/// The ids of a claim's reply: decimal ids joined by `,` (`""` for none).
pub(crate) fn claimed_ids(r: &Reply) -> Result<Vec<ItemId>> {
    let text = r.bytes()?;
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(|b| *b == b',')
        .map(|s| {
            std::str::from_utf8(s)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .filter(|id| *id > 0)
                .map(ItemId::new)
                .ok_or_else(|| Error::Corrupt {
                    what: format!(
                        "claim answered id {:?}",
                        String::from_utf8_lossy(&s[..s.len().min(40)])
                    ),
                })
        })
        .collect()
}

/// One lease of a claim's reply: the item's id, its record (its
/// `enq,max,pri,payload` as stored) and the lease's attempt. The claim does
/// not send back what the caller knows: the lease's token (the caller's, in
/// slot order) and its expiry (one for the whole claim).
pub(crate) fn claimed(
    queue: &QueueName,
    id: ItemId,
    record: &Reply,
    attempts: u32,
    token: LeaseToken,
    expires_at: u64,
) -> Result<Lease> {
    let rec = record.bytes()?;
    let mut commas = rec
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b',')
        .map(|(i, _)| i);
    let (Some(a), Some(b), Some(c)) = (commas.next(), commas.next(), commas.next()) else {
        return Err(Error::Corrupt {
            what: format!(
                "item record {:?} is not enq,max,pri,payload",
                String::from_utf8_lossy(&rec[..rec.len().min(60)])
            ),
        });
    };
    let enq = record_int(&rec[..a], "the enqueue time", &rec)?;
    let max = record_int(&rec[a + 1..b], "max attempts", &rec)?;
    let pri = record_int(&rec[b + 1..c], "the priority", &rec)?;
    Ok(Lease {
        key: LeaseKey {
            queue: queue.clone(),
            id,
            token,
        },
        payload: rec.slice(c + 1..),
        attempts,
        max_attempts: max_attempts_of(&Reply::Int(max))?,
        priority: i32_of(&Reply::Int(pri))?,
        expires_at: Timestamp::from_millis(expires_at),
        enqueued_at: Timestamp::from_millis(u64::try_from(enq).map_err(|_| Error::Corrupt {
            what: format!("enqueue time {enq} is negative"),
        })?),
    })
}

/// One signed id per item of a batch of `n`: the item's id, negated when
/// the item was deduplicated (ids start at 1, so 0 is never sent).
pub(crate) fn enqueued(rows: &[Reply], n: usize) -> Result<Vec<Enqueued>> {
    if rows.len() != n {
        return Err(Error::Corrupt {
            what: format!("enqueue of {n} items answered {}", rows.len()),
        });
    }
    rows.iter()
        .map(|row| match row.int()? {
            0 => Err(Error::Corrupt {
                what: "enqueue answered id 0".into(),
            }),
            id => Ok(Enqueued {
                id: ItemId::new(id.unsigned_abs()),
                deduplicated: id < 0,
            }),
        })
        .collect()
}

/// A plain batch of `n` items given the `n` ids from `first` on.
pub(crate) fn consecutive(first: u64, n: u64, items: usize) -> Result<Vec<Enqueued>> {
    if first == 0 || usize::try_from(n).ok() != Some(items) || first.checked_add(n).is_none() {
        return Err(Error::Corrupt {
            what: format!("enqueue of {items} items answered {n} ids from {first}"),
        });
    }
    Ok((first..first + n)
        .map(|id| Enqueued {
            id: ItemId::new(id),
            deduplicated: false,
        })
        .collect())
}

/// `{ index, id, problem }` triples, each logged as it is decoded: entries
/// repaired, items quarantined, and (from inspection) unusable items left
/// to their lease holder.
pub(crate) fn repairs(queue: &QueueName, r: &Reply) -> Result<Vec<Repair>> {
    let mut out = Vec::new();
    for rep in r.array()? {
        let f = rep.tuple(3)?;
        let repair = Repair {
            index: state_of(&f[0])?,
            id: ItemId::new(f[1].uint()?),
            problem: f[2].text()?,
        };
        tracing::warn!(queue = %queue, index = %repair.index, id = %repair.id,
            problem = %repair.problem, "leaseq-redis: corrupt index entry or item met");
        out.push(repair);
    }
    Ok(out)
}

/// `{ id, state, payload, priority, attempts, max, dedup key, due, last
/// error, enqueued at, progress, cancel requested }` (the last two set only
/// for a Leased item).
pub(crate) fn item(r: &Reply) -> Result<ItemInfo> {
    let f = r.tuple(12)?;
    Ok(ItemInfo {
        id: ItemId::new(f[0].uint()?),
        state: state_of(&f[1])?,
        payload: f[2].bytes()?,
        priority: i32_of(&f[3])?,
        attempts: attempts_of(&f[4])?,
        max_attempts: max_attempts_of(&f[5])?,
        dedup_key: opt_lossy(&f[6])?,
        due_at: f[7].opt_uint()?.map(Timestamp::from_millis),
        last_error: opt_lossy(&f[8])?,
        enqueued_at: Timestamp::from_millis(f[9].uint()?),
        progress: match &f[10] {
            Reply::Nil => None,
            p => Some(p.bytes()?),
        },
        cancel_requested: f[11].int()? == 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn d(s: &str) -> Reply {
        Reply::Data(Bytes::from(s.to_string()))
    }

    #[test]
    fn a_lease_decodes_and_a_bad_one_is_an_error() {
        let q = QueueName::new("q").expect("valid");
        let tok = LeaseToken::random();
        let r = Reply::Array(vec![
            Reply::Int(4),
            d(&tok.to_string()),
            d("payload"),
            Reply::Int(1),
            Reply::Int(3),
            Reply::Int(-2),
            Reply::Int(1_700_000_000_000),
            Reply::Int(30_250),
        ]);
        let l = lease(&q, &r).expect("decodes");
        assert_eq!((l.id(), l.token(), l.priority), (ItemId::new(4), tok, -2));
        assert_eq!(l.enqueued_at, Timestamp::from_millis(1_699_999_969_750));
        let bad = Reply::Array(vec![Reply::Int(4)]);
        assert!(lease(&q, &bad).is_err());
    }

    /// A constant of `scripts/common.lua`, `local NAME = value`.
    fn lua_const(name: &str) -> i64 {
        let src = include_str!("scripts/common.lua");
        let line = src
            .lines()
            .find(|l| l.starts_with(&format!("local {name} = ")))
            .unwrap_or_else(|| panic!("no {name} in common.lua"));
        line.rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("a number")
    }

    #[test]
    fn the_scripts_and_the_decoder_share_the_field_limits() {
        assert_eq!(lua_const("ATT_MAX"), i64::from(ATTEMPTS_MAX));
        assert_eq!(lua_const("MAX_ATT_MAX"), i64::from(MAX_ATTEMPTS_MAX));
        assert_eq!(lua_const("ID_MAX"), (1i64 << 53) - 1);
        let src = include_str!("scripts/common.lua");
        assert!(src.contains(&format!(
            "local PRI_MIN, PRI_MAX = {}, {}",
            i32::MIN,
            i32::MAX
        )));
    }

    #[test]
    fn fields_outside_the_limits_are_corrupt() {
        let q = QueueName::new("q").expect("valid");
        let tok = LeaseToken::random();
        let lease_with = |att: i64, max: i64, pri: i64| {
            Reply::Array(vec![
                Reply::Int(4),
                d(&tok.to_string()),
                d("p"),
                Reply::Int(att),
                Reply::Int(max),
                Reply::Int(pri),
                Reply::Int(1),
                Reply::Int(0),
            ])
        };
        assert!(lease(&q, &lease_with(1, 1, 0)).is_ok());
        let top = i64::from(i32::MAX);
        assert!(lease(&q, &lease_with(top, top, i64::from(i32::MIN))).is_ok());
        for (att, max, pri) in [
            (top + 1, top, 0),
            (-1, 3, 0),
            (1, 0, 0),
            (1, top + 1, 0),
            (1, 3, top + 1),
        ] {
            assert!(
                matches!(
                    lease(&q, &lease_with(att, max, pri)),
                    Err(Error::Corrupt { .. })
                ),
                "{att} {max} {pri}"
            );
        }
    }

    #[test]
    fn a_state_or_none_decodes() {
        assert_eq!(opt_state(&Reply::Nil).ok(), Some(None));
        assert_eq!(opt_state(&d("dead")).ok(), Some(Some(ItemState::Dead)));
        assert!(opt_state(&d("gone")).is_err());
    }

    #[test]
    fn an_item_with_nils_decodes() {
        let r = Reply::Array(vec![
            Reply::Int(9),
            d("dead"),
            d(""),
            Reply::Int(0),
            Reply::Int(2),
            Reply::Int(2),
            Reply::Nil,
            Reply::Nil,
            d("boom"),
            Reply::Int(1_700_000_000_000),
            Reply::Nil,
            Reply::Int(0),
        ]);
        let i = item(&r).expect("decodes");
        assert_eq!(i.state, ItemState::Dead);
        assert_eq!(i.last_error.as_deref(), Some("boom"));
        assert_eq!(i.due_at, None);
        assert_eq!(i.enqueued_at, Timestamp::from_millis(1_700_000_000_000));
    }

    #[test]
    fn claim_rows_and_signed_enqueue_ids_decode() {
        let q = QueueName::new("q").expect("valid");
        let tok = LeaseToken::random();
        let l = claimed(&q, ItemId::new(4), &d("750,3,-2,p,q"), 1, tok, 1_000).expect("decodes");
        assert_eq!((l.id(), l.token(), l.priority), (ItemId::new(4), tok, -2));
        assert_eq!((l.max_attempts, &l.payload[..]), (3, &b"p,q"[..]));
        assert_eq!(l.expires_at, Timestamp::from_millis(1_000));
        assert_eq!(l.enqueued_at, Timestamp::from_millis(750));
        for bad in [
            "750,3,-2",
            "750,x,1,p",
            "750,0,1,p",
            "-1,3,1,p",
            "1,3,2147483648,p",
        ] {
            assert!(
                matches!(
                    claimed(&q, ItemId::new(4), &d(bad), 1, tok, 1_000),
                    Err(Error::Corrupt { .. })
                ),
                "{bad}"
            );
        }
        let ids = claimed_ids(&d("4,17,9007199254740991")).expect("decodes");
        assert_eq!(
            ids.iter().map(|i| i.get()).collect::<Vec<_>>(),
            vec![4, 17, 9_007_199_254_740_991]
        );
        assert!(claimed_ids(&d("")).expect("decodes").is_empty());
        for bad in [
            "4,",
            ",4",
            "4,,5",
            "0",
            "4,x",
            "-4",
            "+4",
            " 4",
            "99999999999999999999",
        ] {
            assert!(
                matches!(claimed_ids(&d(bad)), Err(Error::Corrupt { .. })),
                "{bad}"
            );
        }
        assert!(attempts(&Reply::Int(-1)).is_err());
        let out = enqueued(&[Reply::Int(7), Reply::Int(-3)], 2).expect("decodes");
        assert_eq!((out[0].id, out[0].deduplicated), (ItemId::new(7), false));
        assert_eq!((out[1].id, out[1].deduplicated), (ItemId::new(3), true));
        assert!(enqueued(&[Reply::Int(0)], 1).is_err());
        assert!(enqueued(&[Reply::Int(1)], 2).is_err());
        let run = consecutive(5, 3, 3).expect("decodes");
        assert_eq!(
            run.iter().map(|e| e.id.get()).collect::<Vec<_>>(),
            vec![5, 6, 7]
        );
        assert!(consecutive(5, 3, 2).is_err());
        assert!(consecutive(0, 1, 1).is_err());
    }

    #[test]
    fn an_enqueue_time_after_the_expiry_decodes_without_wrapping() {
        assert_eq!(enqueued_before(5, -3), Timestamp::from_millis(8));
        assert_eq!(enqueued_before(5, 9), Timestamp::ZERO);
    }
}
