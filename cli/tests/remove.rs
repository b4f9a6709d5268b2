//! `leaseq remove <queue> --id <id>` (or the id alone, as earlier
//! versions took it), run as a user would: on an SQLite file
//! (`--features sqlite`) the item named leaves its queue from whatever state
//! it is in, its lease is lost, and every other item stays; an id the queue
//! does not hold is exit code 3 and changes nothing. A bad id is a usage
//! error on any build.

mod common;

use common::leaseq;
use predicates::str::contains;

#[test]
fn an_id_that_is_not_a_number_is_a_usage_error() {
    for args in [
        &["remove", "jobs", "seven"][..],
        &["remove", "jobs", "--id", "seven"],
    ] {
        leaseq()
            .args(args)
            .assert()
            .code(2)
            .stderr(contains("invalid value 'seven'"));
    }
    // No id at all, or two.
    for args in [
        &["remove", "jobs"][..],
        &["remove", "jobs", "1", "--id", "2"],
    ] {
        leaseq().args(args).assert().code(2);
    }
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::time::Duration;

    use leaseq::{ClaimSpec, Error, ItemId, ItemState, NewItem, QueueName};

    use super::*;

    #[test]
    fn remove_takes_out_the_item_named_and_nothing_else() {
        let db = common::SqliteFile::new("remove");
        db.leaseq().arg("migrate").assert().success();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        let backend = rt
            .block_on(leaseq::connect(&db.url))
            .expect("open the file");
        let queue = QueueName::new("mail").expect("name");
        let ids: Vec<ItemId> = rt
            .block_on(backend.enqueue(
                &queue,
                ["a", "b", "c"].into_iter().map(NewItem::new).collect(),
            ))
            .expect("enqueue")
            .into_iter()
            .map(|e| e.id)
            .collect();
        let spec = ClaimSpec::new(1, Duration::from_secs(3600)).expect("spec");
        let lease = rt
            .block_on(backend.claim(&queue, spec))
            .expect("claim")
            .leases
            .pop()
            .expect("a's lease");
        assert_eq!(lease.id(), ids[0]);

        // The leased item: removed, its lease lost.
        db.leaseq()
            .args(["remove", "mail", &ids[0].to_string()])
            .assert()
            .success()
            .stdout(contains(format!(
                "removed item {} of mail (it was leased)",
                ids[0]
            )));
        assert!(matches!(
            rt.block_on(backend.ack(&lease.key)),
            Err(Error::LeaseLost { .. })
        ));
        // A Ready one, named as the other commands name an item.
        db.leaseq()
            .args(["remove", "mail", "--id", &ids[2].to_string()])
            .assert()
            .success()
            .stdout(contains(format!(
                "removed item {} of mail (it was ready)",
                ids[2]
            )));

        // Gone now, or never handed out: exit code 3.
        for id in [
            ids[0].to_string(),
            ids[2].to_string(),
            "9999999".to_string(),
        ] {
            db.leaseq()
                .args(["remove", "mail", &id])
                .assert()
                .code(3)
                .stderr(contains(format!("item {id} not found in queue \"mail\"")));
        }
        let kept = rt.block_on(backend.item(&queue, ids[1])).expect("b stays");
        assert_eq!(kept.state, ItemState::Ready);
        let stats = rt.block_on(backend.stats(&queue)).expect("stats");
        assert_eq!((stats.ready, stats.leased, stats.total()), (1, 0, 1));
    }
}
