//! Turning script replies into the core's types.

use leaseq_core::{
    Error, ItemId, ItemInfo, ItemState, Lease, LeaseKey, LeaseToken, QueueName, Repair, Result,
    Timestamp,
};

use crate::Reply;

fn u32_of(r: &Reply) -> Result<u32> {
    u32::try_from(r.uint()?).map_err(|_| Error::Corrupt {
        what: format!("count out of range: {r:?}"),
    })
}

fn i32_of(r: &Reply) -> Result<i32> {
    i32::try_from(r.int()?).map_err(|_| Error::Corrupt {
        what: format!("priority out of range: {r:?}"),
    })
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

/// `{ id, token, payload, attempts, max attempts, priority, expires at }`.
pub(crate) fn lease(queue: &QueueName, r: &Reply) -> Result<Lease> {
    let f = r.tuple(7)?;
    let token: LeaseToken = f[1].text()?.parse().map_err(|_| Error::Corrupt {
        what: format!("bad token in claim reply: {:?}", f[1]),
    })?;
    Ok(Lease {
        key: LeaseKey {
            queue: queue.clone(),
            id: ItemId::new(f[0].uint()?),
            token,
        },
        payload: f[2].bytes()?,
        attempts: u32_of(&f[3])?,
        max_attempts: u32_of(&f[4])?,
        priority: i32_of(&f[5])?,
        expires_at: Timestamp::from_millis(f[6].uint()?),
    })
}

/// `{ index, id, problem }` triples, each logged as it is decoded.
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
            problem = %repair.problem, "leaseq-redis: repaired corrupt index entry");
        out.push(repair);
    }
    Ok(out)
}

/// `{ id, state, payload, priority, attempts, max, dedup key, due, last error }`.
pub(crate) fn item(r: &Reply) -> Result<ItemInfo> {
    let f = r.tuple(9)?;
    Ok(ItemInfo {
        id: ItemId::new(f[0].uint()?),
        state: state_of(&f[1])?,
        payload: f[2].bytes()?,
        priority: i32_of(&f[3])?,
        attempts: u32_of(&f[4])?,
        max_attempts: u32_of(&f[5])?,
        dedup_key: f[6].opt_text()?,
        due_at: f[7].opt_uint()?.map(Timestamp::from_millis),
        last_error: f[8].opt_text()?,
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
        ]);
        let l = lease(&q, &r).expect("decodes");
        assert_eq!((l.id(), l.token(), l.priority), (ItemId::new(4), tok, -2));
        let bad = Reply::Array(vec![Reply::Int(4)]);
        assert!(lease(&q, &bad).is_err());
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
        ]);
        let i = item(&r).expect("decodes");
        assert_eq!(i.state, ItemState::Dead);
        assert_eq!(i.last_error.as_deref(), Some("boom"));
        assert_eq!(i.due_at, None);
    }
}
