//! The single-slot property: every key any script declares (the crate's own
//! `KEYS` arrays), every key the scripts name after the queue's key prefix
//! (key layout 2: the items hash, the indexes, the lease and per-item
//! hashes, the counters), the keys of layout 1 the scripts probe for, and a
//! request key, hash to one slot per queue, by the crate's CRC16, by the
//! client crate's slot function, and by a live cluster node's `CLUSTER
//! KEYSLOT`. Shards of a sharded queue each keep to one slot of their own.

mod common;

use leaseq_core::{LeaseToken, QueueName};
use leaseq_redis::keys::{key_slot, KeyLayout};

/// The keys of `keys.rs`'s table the layout has no accessor for.
const NAMED_AFTER_THE_PREFIX: [&str; 10] = [
    "lease:ids",
    "lease:live",
    "lease:moved",
    "errors",
    "dedup:keys",
    "unique:for",
    "held",
    "heldid",
    "seq:run",
    "seq:deleted",
];

fn every_key(layout: &KeyLayout) -> Vec<String> {
    let mut keys = layout.script_keys();
    keys.extend([
        layout.ready_fifo(),
        layout.ready(),
        layout.scheduled(),
        layout.lease_groups(),
        layout.dead(),
        layout.items(),
        layout.lease_tokens(),
        layout.attempts(),
        layout.cancel_requests(),
        layout.progress(),
        layout.seq(),
        layout.id_mark(),
        layout.id_run(),
        layout.deleted_up_to(),
        layout.dead_seq(),
        layout.dedup(),
        layout.notify(),
        layout.limits(),
        layout.listed(),
        layout.listing_generation(),
        layout.request(LeaseToken::random()),
        layout.completed(),
        layout.dead_times(),
        layout.dead_retention(),
        layout.events_stream(),
        layout.events_gate(),
    ]);
    let prefix = layout.key_prefix();
    keys.extend(
        NAMED_AFTER_THE_PREFIX
            .iter()
            .map(|name| format!("{prefix}{name}")),
    );
    keys.extend(layout.layout1_indexes());
    keys
}

#[test]
fn every_key_of_a_queue_hashes_to_one_slot() {
    let cluster = match common::cluster::shared() {
        Ok(c) => Some(c),
        Err(e) => {
            common::unavailable("a local Redis Cluster", e);
            None
        }
    };
    for (prefix, queue) in [
        ("leaseq", "emails"),
        ("p", "q"),
        ("a.b-c_d:e", "x:y:0"),
        ("t", "storm:3"),
    ] {
        let layout = KeyLayout::new(prefix, &QueueName::new(queue).expect("name")).expect("layout");
        let keys = every_key(&layout);
        assert_eq!(keys.len(), 1 + 26 + 10 + 4);
        for key in &keys {
            assert_eq!(key_slot(key.as_bytes()), layout.slot(), "{key}");
            #[cfg(feature = "fred")]
            assert_eq!(
                fred::util::redis_keyslot(key.as_bytes()),
                layout.slot(),
                "{key}"
            );
            if let Some(c) = cluster {
                let client =
                    redis::Client::open(format!("redis://127.0.0.1:{}", c.ports[0])).expect("url");
                let mut conn = client.get_connection().expect("node");
                let live: u16 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(key)
                    .query(&mut conn)
                    .expect("keyslot");
                assert_eq!(live, layout.slot(), "{key}");
            }
        }
    }
}

#[test]
fn shards_keep_one_slot_each() {
    let q = QueueName::new("jobs").expect("name");
    let slots: Vec<u16> = (0..4)
        .map(|i| {
            let shard = QueueName::new(format!("{q}:{i}")).expect("name");
            let layout = KeyLayout::new("leaseq", &shard).expect("layout");
            let s = layout.slot();
            assert!(every_key(&layout)
                .iter()
                .all(|k| key_slot(k.as_bytes()) == s));
            s
        })
        .collect();
    let mut distinct = slots.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "shards share a slot: {slots:?}");
}
