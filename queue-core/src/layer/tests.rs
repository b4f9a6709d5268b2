//! Every operation of [`Backend`] is forwarded by [`Layer`], by the blanket
//! impl and by the `Arc` impl: checked in the source (so a method added to
//! the trait and not to the forwarding fails here) and at run time (so a
//! forwarding line that calls the wrong operation fails here).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::Layer;
use crate::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use crate::{
    Backend, Capabilities, ClaimSpec, Claimed, Enqueued, Error, ItemId, ItemInfo, ItemState,
    LeaseFate, LeaseKey, LeaseToken, LeaseTtl, NewItem, QueueLimits, QueueName, QueueStats,
    ReapReport, Released, Result, TestHooks, Timestamp,
};

/// The method names declared in the block that opens with `header` (up to
/// the first line that is a lone `}` at column 0).
fn methods(source: &str, header: &str) -> BTreeSet<String> {
    let start = source
        .find(header)
        .unwrap_or_else(|| panic!("`{header}` not found"));
    let block = &source[start..];
    let end = block.find("\n}\n").unwrap_or(block.len());
    block[..end]
        .lines()
        .filter_map(|line| {
            let l = line.strip_prefix("    ")?;
            let l = l.strip_prefix("async ").unwrap_or(l);
            let rest = l.strip_prefix("fn ")?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            Some(name)
        })
        .collect()
}

#[test]
fn every_backend_method_is_forwarded_in_the_source() {
    let backend = methods(include_str!("../backend.rs"), "pub trait Backend");
    let layer_src = include_str!("mod.rs");
    assert!(backend.len() >= 18, "parsed too few methods: {backend:?}");
    let mut layer = methods(layer_src, "pub trait Layer");
    assert!(layer.remove("inner"), "Layer::inner not found");
    let blanket = methods(layer_src, "impl<L: Layer> Backend for L");
    let arc = methods(layer_src, "impl<B: Backend + ?Sized> Backend for Arc<B>");
    assert_eq!(layer, backend, "Layer must mirror every Backend method");
    assert_eq!(
        blanket, backend,
        "the blanket impl must forward every method"
    );
    assert_eq!(arc, backend, "the Arc impl must forward every method");
}

/// Records the name of every operation that reaches it.
#[derive(Debug, Default)]
struct Recorder {
    calls: Mutex<Vec<&'static str>>,
}

impl Recorder {
    fn hit<T>(&self, name: &'static str) -> Result<T> {
        self.calls.lock().expect("lock").push(name);
        Err(Error::invalid(name))
    }
}

#[async_trait]
impl Backend for Recorder {
    fn capabilities(&self) -> Capabilities {
        let _ = self.hit::<()>("capabilities");
        Capabilities::all_features()
    }
    fn limits(&self) -> crate::Limits {
        let _ = self.hit::<()>("limits");
        crate::Limits::default()
    }
    async fn now(&self) -> Result<Timestamp> {
        self.hit("now")
    }
    async fn enqueue(&self, _: &QueueName, _: Vec<NewItem>) -> Result<Vec<Enqueued>> {
        self.hit("enqueue")
    }
    async fn enqueue_once(
        &self,
        _: &QueueName,
        _: LeaseToken,
        _: Vec<NewItem>,
    ) -> Result<Vec<Enqueued>> {
        self.hit("enqueue_once")
    }
    async fn claim(&self, _: &QueueName, _: ClaimSpec) -> Result<Claimed> {
        self.hit("claim")
    }
    async fn recover_claim(&self, _: &QueueName, _: &ClaimSpec) -> Result<Claimed> {
        self.hit("recover_claim")
    }
    async fn lease_fate(&self, _: &LeaseKey, _: Timestamp) -> Result<LeaseFate> {
        self.hit("lease_fate")
    }
    async fn ack(&self, _: &LeaseKey) -> Result<()> {
        self.hit("ack")
    }
    async fn ack_many(&self, _: &[LeaseKey]) -> Result<Vec<Result<()>>> {
        self.hit("ack_many")
    }
    async fn extend(&self, _: &LeaseKey, _: LeaseTtl) -> Result<Timestamp> {
        self.hit("extend")
    }
    async fn release(&self, _: &LeaseKey, _: Duration) -> Result<Released> {
        self.hit("release")
    }
    async fn give_back(&self, _: &LeaseKey) -> Result<()> {
        self.hit("give_back")
    }
    async fn fail(&self, _: &LeaseKey, _: &str) -> Result<()> {
        self.hit("fail")
    }
    async fn reap(&self, _: &QueueName) -> Result<ReapReport> {
        self.hit("reap")
    }
    async fn stats(&self, _: &QueueName) -> Result<QueueStats> {
        self.hit("stats")
    }
    async fn queues(&self) -> Result<Vec<QueueName>> {
        self.hit("queues")
    }
    async fn peek(&self, _: &QueueName, _: ItemState, _: usize) -> Result<Vec<ItemInfo>> {
        self.hit("peek")
    }
    async fn item(&self, _: &QueueName, _: ItemId) -> Result<ItemInfo> {
        self.hit("item")
    }
    async fn redrive(&self, _: &QueueName, _: usize) -> Result<u64> {
        self.hit("redrive")
    }
    async fn redrive_item(&self, _: &QueueName, _: ItemId) -> Result<bool> {
        self.hit("redrive_item")
    }
    async fn remove_item(&self, _: &QueueName, _: ItemId) -> Result<ItemState> {
        self.hit("remove_item")
    }
    async fn purge(&self, _: &QueueName) -> Result<u64> {
        self.hit("purge")
    }
    async fn delete_queue(&self, _: &QueueName) -> Result<u64> {
        self.hit("delete_queue")
    }
    async fn set_queue_limits(&self, _: &QueueName, _: QueueLimits) -> Result<()> {
        self.hit("set_queue_limits")
    }
    async fn queue_limits(&self, _: &QueueName) -> Result<QueueLimits> {
        self.hit("queue_limits")
    }
    async fn wait_for_work(&self, _: &QueueName, _: Duration) {
        let _ = self.hit::<()>("wait_for_work");
    }
    async fn put_schedule(&self, _: &Schedule) -> Result<StoredSchedule> {
        self.hit("put_schedule")
    }
    async fn remove_schedule(&self, _: &ScheduleName) -> Result<bool> {
        self.hit("remove_schedule")
    }
    async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.hit("schedules")
    }
    async fn fire_schedule(&self, _: &ScheduleTick, _: NewItem) -> Result<Fired> {
        self.hit("fire_schedule")
    }
    fn test_hooks(&self) -> Option<&dyn TestHooks> {
        let _ = self.hit::<()>("test_hooks");
        None
    }
}

/// A layer that changes nothing.
#[derive(Debug)]
struct Nothing<B>(B);

impl<B: Backend + ?Sized> Layer for Nothing<Arc<B>> {
    type Inner = Arc<B>;
    fn inner(&self) -> &Arc<B> {
        &self.0
    }
}

/// Calls every operation once through `b`.
async fn call_everything(b: &dyn Backend) {
    let q = QueueName::new("q").expect("name");
    let lease = LeaseKey {
        queue: q.clone(),
        id: ItemId::new(1),
        token: LeaseToken::random(),
    };
    let spec = ClaimSpec::new(2, Duration::from_secs(1)).expect("spec");
    let ttl = LeaseTtl::new(Duration::from_secs(1)).expect("ttl");
    let _ = b.capabilities();
    let _ = b.limits();
    let _ = b.now().await;
    let _ = b.enqueue(&q, vec![NewItem::new("x")]).await;
    let _ = b
        .enqueue_once(&q, LeaseToken::random(), vec![NewItem::new("x")])
        .await;
    let _ = b.claim(&q, spec.duplicate()).await;
    let _ = b.recover_claim(&q, &spec).await;
    let _ = b.lease_fate(&lease, Timestamp::from_millis(1)).await;
    let _ = b.ack(&lease).await;
    let _ = b.ack_many(std::slice::from_ref(&lease)).await;
    let _ = b.extend(&lease, ttl).await;
    let _ = b.release(&lease, Duration::ZERO).await;
    let _ = b.give_back(&lease).await;
    let _ = b.fail(&lease, "r").await;
    let _ = b.reap(&q).await;
    let _ = b.stats(&q).await;
    let _ = b.queues().await;
    let _ = b.peek(&q, ItemState::Ready, 1).await;
    let _ = b.item(&q, ItemId::new(1)).await;
    let _ = b.redrive(&q, 1).await;
    let _ = b.redrive_item(&q, ItemId::new(1)).await;
    let _ = b.remove_item(&q, ItemId::new(1)).await;
    let _ = b.purge(&q).await;
    let _ = b.delete_queue(&q).await;
    let _ = b
        .set_queue_limits(&q, QueueLimits::NONE.concurrency(1))
        .await;
    let _ = b.queue_limits(&q).await;
    b.wait_for_work(&q, Duration::ZERO).await;
    let schedule = Schedule::every("s", q.clone(), Duration::from_secs(1), "x").expect("schedule");
    let _ = b.put_schedule(&schedule).await;
    let _ = b.remove_schedule(schedule.name()).await;
    let _ = b.schedules().await;
    let tick = ScheduleTick {
        name: schedule.name().clone(),
        revision: 1,
        at: Timestamp::from_millis(1),
    };
    let _ = b.fire_schedule(&tick, NewItem::new("x")).await;
    let _ = b.test_hooks();
}

#[tokio::test]
async fn every_operation_reaches_the_inner_backend_as_itself() {
    let recorder = Arc::new(Recorder::default());
    // Two layers over an Arc over the recorder, seen as `dyn Backend`.
    let inner: Arc<dyn Backend> = recorder.clone();
    let stack: Arc<dyn Backend> = Arc::new(Nothing(Arc::new(Nothing(inner))));
    call_everything(stack.as_ref()).await;
    let calls = recorder.calls.lock().expect("lock").clone();
    let declared = methods(include_str!("../backend.rs"), "pub trait Backend");
    let reached: BTreeSet<String> = calls.iter().map(|c| c.to_string()).collect();
    assert_eq!(
        calls.len(),
        reached.len(),
        "an operation reached the inner backend more than once (a default loop?): {calls:?}"
    );
    assert_eq!(
        reached, declared,
        "operations that did not reach the inner backend as themselves"
    );
}
