//! `queues` through the `Sharded` layer: the logical queues of the shards
//! the inner backend lists, read back from the shards' names and kept only
//! when they name a shard of this layer.

use leaseq_core::BackendExt as _;
use std::sync::Arc;

use leaseq_conformance::runner::block_on;
use leaseq_core::layer::shard::Sharded;
use leaseq_core::{Backend, Error, NewItem, QueueName};
use leaseq_memory::MemoryBackend;

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("name")
}

async fn push(b: &dyn Backend, queue: &str, n: usize) {
    let items = (0..n).map(|i| NewItem::new(format!("{i}"))).collect();
    b.enqueue(&q(queue), items).await.expect("enqueue");
}

#[test]
fn the_layer_lists_logical_queues_once_and_leaves_out_other_queues() {
    block_on(async {
        let inner = Arc::new(MemoryBackend::new());
        let sharded = Sharded::new(inner.clone(), 4).expect("4 shards");
        // Spread over several shards: listed once.
        push(&sharded, "mail", 9).await;
        push(&sharded, "a:b", 1).await;
        // Queues of the same store that are no shard of this layer: a plain
        // name, a shard number beyond 4, one not written as `{}` writes it.
        for plain in ["jobs", "mail:7", "mail:01"] {
            push(inner.as_ref(), plain, 1).await;
        }
        assert_eq!(
            sharded.queues().await.expect("queues"),
            vec![q("a:b"), q("mail")]
        );
        assert_eq!(
            sharded
                .admin()
                .expect("admin")
                .purge(&q("mail"))
                .await
                .expect("purge"),
            9
        );
        assert_eq!(sharded.queues().await.expect("queues"), vec![q("a:b")]);
    });
}

#[test]
fn custom_shard_names_list_through_their_inverse() {
    block_on(async {
        let inner = Arc::new(MemoryBackend::new());
        let named = |qn: &QueueName, i: u16| QueueName::new(format!("s{i}.{qn}"));
        let unparsed = Sharded::new(inner.clone(), 2)
            .expect("2 shards")
            .shard_names(named);
        push(&unparsed, "mail", 2).await;
        assert!(
            matches!(unparsed.queues().await, Err(Error::Unsupported { .. })),
            "custom names without their inverse cannot be read back"
        );
        // An inverse that accepts too much: only names the layer would
        // give come through.
        let parsed = Sharded::new(inner.clone(), 2)
            .expect("2 shards")
            .shard_names(named)
            .shard_parser(|p: &QueueName| {
                let (shard, logical) = p.as_str().split_once('.')?;
                let i = shard.strip_prefix('s').unwrap_or(shard).parse().ok()?;
                Some((QueueName::new(logical).ok()?, i))
            });
        push(inner.as_ref(), "s9.other", 1).await;
        push(inner.as_ref(), "7.stray", 1).await;
        assert_eq!(parsed.queues().await.expect("queues"), vec![q("mail")]);
    });
}
