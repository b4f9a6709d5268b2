//! The cancel-to-handler measurement runs end to end on the memory
//! backend: every cancel of a running handler answers `Requested`, is seen
//! by the handler, and ends its item Cancelled.

use std::time::Duration;

use leaseq_benches::cancel::{self, CancelConfig};
use leaseq_benches::targets::MemoryFactory;
use leaseq_conformance::BackendFactory;
use leaseq_core::QueueName;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cancel_reaches_its_handler_and_ends_the_item() {
    let target = MemoryFactory::system_clock()
        .backend()
        .await
        .expect("memory backend");
    let q = QueueName::new("cancel-latency").expect("name");
    for spread in [false, true] {
        let config = CancelConfig {
            cancels: 12,
            lanes: 4,
            lease: Duration::from_millis(600),
            spread,
        };
        let r = cancel::run("memory", target.backend.clone(), &q, &config)
            .await
            .expect("run");
        assert_eq!((r.cancels, r.ended_cancelled), (12, 12), "{r:?}");
        assert_eq!(r.heartbeat_ms, 200);
        assert!(r.latency.p50_us > 0 && r.latency.max_us >= r.latency.p99_us);
    }
}
