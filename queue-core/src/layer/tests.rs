//! Every operation of [`Backend`] and of its groups reaches the inner
//! backend as itself through [`LayeredBackend`]'s defaults, the blanket
//! impl and the `Arc` impl (a forwarding line that calls the wrong
//! operation fails here). A method added to [`Backend`] and not forwarded
//! fails the build, or `clippy::missing_trait_methods`, before this runs.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::LayeredBackend;
use crate::schedule::{Fired, Schedule, ScheduleName, ScheduleTick, StoredSchedule};
use crate::{
    Admin, Backend, BackendExt, Capabilities, ClaimSpec, Claimed, Enqueued, Error, Groups, ItemId,
    ItemInfo, ItemState, LeaseFate, LeaseKey, LeaseToken, LeaseTtl, LimitScope, NewItem,
    QueueLimits, QueueName, QueueStats, ReapReport, Released, Result, ScheduleStore, Throttles,
    Timestamp,
};

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
    async fn extend(&self, _: &LeaseKey, _: LeaseTtl) -> Result<crate::Extended> {
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
    async fn wait_for_work(&self, _: &QueueName, _: Duration) {
        let _ = self.hit::<()>("wait_for_work");
    }
    fn groups(&self) -> Groups<'_> {
        let _ = self.hit::<()>("groups");
        Groups::none().admin(self).throttles(self).schedules(self)
    }
}

#[async_trait]
impl Admin for Recorder {
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
}

#[async_trait]
impl Throttles for Recorder {
    fn scope(&self) -> LimitScope {
        let _ = self.hit::<()>("scope");
        LimitScope::Global
    }
    async fn set_queue_limits(&self, _: &QueueName, _: QueueLimits) -> Result<()> {
        self.hit("set_queue_limits")
    }
    async fn queue_limits(&self, _: &QueueName) -> Result<QueueLimits> {
        self.hit("queue_limits")
    }
}

#[async_trait]
impl ScheduleStore for Recorder {
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
}

/// A layer that changes nothing.
#[derive(Debug)]
struct Nothing<B>(B);

impl<B: Backend + ?Sized> LayeredBackend for Nothing<Arc<B>> {
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
    let admin = b.admin().expect("admin");
    let _ = admin.redrive(&q, 1).await;
    let _ = admin.redrive_item(&q, ItemId::new(1)).await;
    let _ = admin.remove_item(&q, ItemId::new(1)).await;
    let _ = admin.purge(&q).await;
    let _ = admin.delete_queue(&q).await;
    let throttles = b.throttles().expect("throttles");
    let _ = throttles.scope();
    let _ = throttles
        .set_queue_limits(&q, QueueLimits::NONE.concurrency(1))
        .await;
    let _ = throttles.queue_limits(&q).await;
    b.wait_for_work(&q, Duration::ZERO).await;
    let schedule = Schedule::every("s", q.clone(), Duration::from_secs(1), "x").expect("schedule");
    let schedules = b.schedule_store().expect("schedules");
    let _ = schedules.put_schedule(&schedule).await;
    let _ = schedules.remove_schedule(schedule.name()).await;
    let _ = schedules.schedules().await;
    let tick = ScheduleTick {
        name: schedule.name().clone(),
        revision: 1,
        at: Timestamp::from_millis(1),
    };
    let _ = schedules.fire_schedule(&tick, NewItem::new("x")).await;
}

#[tokio::test]
async fn every_operation_reaches_the_inner_backend_as_itself() {
    let recorder = Arc::new(Recorder::default());
    // Two layers over an Arc over the recorder, seen as `dyn Backend`.
    let inner: Arc<dyn Backend> = recorder.clone();
    let stack: Arc<dyn Backend> = Arc::new(Nothing(Arc::new(Nothing(inner))));
    call_everything(stack.as_ref()).await;
    let calls = recorder.calls.lock().expect("lock").clone();
    let reached: BTreeSet<String> = calls.iter().map(|c| c.to_string()).collect();
    // `groups` is asked once per group reached (admin, throttles, schedules).
    let once: Vec<&&str> = calls.iter().filter(|c| **c != "groups").collect();
    assert_eq!(
        once.len(),
        reached.len() - 1,
        "an operation reached the inner backend more than once (a default loop?): {calls:?}"
    );
    assert_eq!(
        reached,
        EVERY_OPERATION.iter().map(|s| s.to_string()).collect(),
        "operations that did not reach the inner backend as themselves"
    );
}

/// Every operation `call_everything` makes, of the core and each group.
const EVERY_OPERATION: &[&str] = &[
    "capabilities",
    "now",
    "enqueue",
    "enqueue_once",
    "claim",
    "recover_claim",
    "lease_fate",
    "ack",
    "ack_many",
    "extend",
    "release",
    "give_back",
    "fail",
    "reap",
    "stats",
    "queues",
    "peek",
    "item",
    "wait_for_work",
    "groups",
    "redrive",
    "redrive_item",
    "remove_item",
    "purge",
    "delete_queue",
    "scope",
    "set_queue_limits",
    "queue_limits",
    "put_schedule",
    "remove_schedule",
    "schedules",
    "fire_schedule",
];
