//! The Lua scripts, one per state transition, each prefixed with the part
//! of the shared prelude (`scripts/common.lua`) it uses (see
//! `src/prelude.rs`), and with the shared parts it names
//! (`scripts/enqueue_batch.lua` for the enqueues).
//!
//! Every script but the two enqueues (and the scripts that write new data:
//! `schedule_fire`, which enqueues, `schedule_put`, `schedule_index`,
//! `queues_register` and `workers`, the registry of live workers) starts with the Redis 7 shebang
//! `#!lua flags=allow-oom`: a server over `maxmemory` (under `noeviction`)
//! still runs it, so consumers keep draining a full server (claim, extend,
//! ack, release, give back, fail, reap, redrive, remove, purge and inspection add no data, or a
//! few bytes per item: a token, an expiry, a reason). The enqueues carry no
//! shebang: the server refuses their first write (the id counter's `SET`,
//! which comes before any item is written) with `OOM`, so an enqueue on a
//! full server writes nothing and fails with [`leaseq_core::Error::Full`];
//! `enqueue_once` still answers a request it has already written (that path
//! only reads).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

/// The shebang of every script that may run on a server over `maxmemory`.
const ALLOW_OOM: &str = "#!lua flags=allow-oom\n";

/// The shared prelude, of which each script keeps what it uses
/// ([`crate::prelude::link`]).
const PRELUDE: &str = include_str!("scripts/common.lua");

macro_rules! script {
    // The script's own part: its body after the shared parts it names.
    (@body $name:literal $(, $part:literal)*) => {
        concat!(
            $(include_str!(concat!("scripts/", $part, ".lua")), "\n",)*
            include_str!(concat!("scripts/", $name, ".lua"))
        )
    };
    // A script that writes new data: refused on a server over `maxmemory`.
    (grows $name:literal $(, $part:literal)*) => {
        Script::new($name, "", script!(@body $name $(, $part)*))
    };
    // Every other script: runs on a server over `maxmemory`.
    ($name:literal $(, $part:literal)*) => {
        Script::new($name, ALLOW_OOM, script!(@body $name $(, $part)*))
    };
}

/// One Lua script with its SHA1, run by `EVALSHA` and loaded on `NOSCRIPT`.
#[derive(Clone, PartialEq, Eq)]
pub struct Script {
    name: &'static str,
    source: Arc<str>,
    sha: String,
}

impl Script {
    /// `shebang`, then the prelude as `body` needs it, then `body`.
    fn new(name: &'static str, shebang: &str, body: &str) -> Self {
        let source: Arc<str> = format!("{shebang}{}", crate::prelude::link(PRELUDE, body)).into();
        Script {
            name,
            sha: sha1_smol::Sha1::from(source.as_bytes())
                .digest()
                .to_string(),
            source,
        }
    }

    /// A short name for errors and logs, e.g. `"claim"`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The full Lua source (shebang and prelude included).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The lowercase hex SHA1 of the source, as `EVALSHA` takes it.
    pub fn sha(&self) -> &str {
        &self.sha
    }
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Script")
            .field("name", &self.name)
            .field("sha", &self.sha)
            .finish()
    }
}

/// Every script the backend runs.
#[derive(Debug, Clone)]
pub(crate) struct Scripts {
    pub(crate) enqueue: Script,
    pub(crate) enqueue_once: Script,
    pub(crate) claim: Script,
    pub(crate) recover_claim: Script,
    pub(crate) lease_fate: Script,
    pub(crate) ack: Script,
    pub(crate) ack_many: Script,
    pub(crate) extend: Script,
    pub(crate) release: Script,
    pub(crate) give_back: Script,
    pub(crate) fail: Script,
    pub(crate) reap: Script,
    pub(crate) stats: Script,
    pub(crate) peek: Script,
    pub(crate) item: Script,
    pub(crate) redrive: Script,
    pub(crate) redrive_item: Script,
    pub(crate) remove_item: Script,
    pub(crate) purge: Script,
    pub(crate) queue_delete: Script,
    pub(crate) hook_expire: Script,
    pub(crate) hook_due: Script,
    pub(crate) hook_dangle: Script,
    pub(crate) hook_snapshot: Script,
    pub(crate) hook_poison: Script,
    pub(crate) hook_postpone: Script,
    pub(crate) time: Script,
    pub(crate) limits_set: Script,
    pub(crate) limits_get: Script,
    pub(crate) schedule_fire: Script,
    pub(crate) schedule_put: Script,
    pub(crate) schedule_get: Script,
    pub(crate) schedule_index: Script,
    pub(crate) queue_prune: Script,
    pub(crate) queues_registry: Script,
    pub(crate) queues_register: Script,
    pub(crate) migrate: Script,
    pub(crate) cancel: Script,
    pub(crate) pause: Script,
    pub(crate) run_now: Script,
    pub(crate) run_all_now: Script,
    pub(crate) progress: Script,
    pub(crate) workers: Script,
    pub(crate) retention: Script,
    pub(crate) finished: Script,
    pub(crate) collect: Script,
    pub(crate) events_on: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            enqueue: script!(grows "enqueue", "enqueue_batch"),
            enqueue_once: script!(grows "enqueue_once", "enqueue_batch"),
            claim: script!("claim", "limits"),
            recover_claim: script!("recover_claim"),
            lease_fate: script!("lease_fate"),
            ack: script!("ack"),
            ack_many: script!("ack_many"),
            extend: script!("extend"),
            release: script!("release"),
            give_back: script!("give_back"),
            fail: script!("fail"),
            reap: script!("reap"),
            stats: script!("stats"),
            peek: script!("peek"),
            item: script!("item"),
            redrive: script!("redrive"),
            redrive_item: script!("redrive_item"),
            remove_item: script!("remove_item"),
            purge: script!("purge", "purge_batch"),
            queue_delete: script!("queue_delete", "purge_batch"),
            hook_expire: script!("hook_expire"),
            hook_due: script!("hook_due"),
            hook_dangle: script!("hook_dangle"),
            hook_snapshot: script!("hook_snapshot"),
            hook_poison: script!("hook_poison"),
            hook_postpone: script!("hook_postpone"),
            time: script!("time"),
            limits_set: script!("limits_set"),
            limits_get: script!("limits_get"),
            schedule_fire: script!(grows "schedule_fire", "enqueue_batch"),
            schedule_put: script!(grows "schedule_put"),
            schedule_get: script!("schedule_get"),
            schedule_index: script!(grows "schedule_index"),
            queue_prune: script!("queue_prune"),
            queues_registry: script!("queues_registry"),
            queues_register: script!(grows "queues_register"),
            migrate: script!("migrate"),
            cancel: script!("cancel"),
            pause: script!("pause"),
            run_now: script!("run_now"),
            run_all_now: script!("run_all_now"),
            progress: script!("progress"),
            workers: script!(grows "workers"),
            retention: script!("retention"),
            finished: script!("finished"),
            collect: script!("collect"),
            events_on: script!("events_on"),
        }
    }
}

/// Numbers and strings as script arguments.
pub(crate) fn arg(v: impl ToString) -> Bytes {
    Bytes::from(v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takeover_traces_are_kept_as_long_as_the_contract_says() {
        let ms = leaseq_core::limits::millis_ceil(leaseq_core::limits::FINISH_MEMORY);
        assert!(PRELUDE.contains(&format!("QUEUE_TAG .. 'taken', {ms}\n")));
        let s = Scripts::new();
        // The reap leaves the traces, the claim drops those of its leases,
        // the fate reads them; a finishing call writes none.
        assert!(s.reap.source().contains("trace_taken(ids, id_toks, now)"));
        assert!(s.claim.source().contains("untrace(toks)"));
        assert!(s.lease_fate.source().contains("local function own_end"));
        for script in [&s.ack, &s.ack_many, &s.release, &s.fail, &s.give_back] {
            let src = script.source();
            assert!(
                !src.contains("local function trace_taken"),
                "{}",
                script.name()
            );
        }
    }

    #[test]
    fn every_script_that_tells_events_writes_them() {
        let s = Scripts::new();
        let mut telling = Vec::new();
        for script in s.all() {
            let src = script.source();
            if src.contains("local function ev(") {
                telling.push(script.name());
                assert!(src.contains("ev_flush()"), "{}", script.name());
            }
        }
        for name in [
            "enqueue", "claim", "ack", "ack_many", "release", "fail", "reap", "cancel",
        ] {
            assert!(telling.contains(&name), "{name}");
        }
        // The bounds of leaseq_core::events, as the scripts cut texts.
        let (text, result) = (
            leaseq_core::events::MAX_EVENT_TEXT,
            leaseq_core::events::MAX_EVENT_RESULT,
        );
        assert!(PRELUDE.contains(&format!(
            "local MAX_EVENT_TEXT, MAX_EVENT_RESULT = {text}, {result}\n"
        )));
    }

    #[test]
    fn scripts_carry_the_prelude_and_a_sha1() {
        let s = Scripts::new();
        assert!(s.claim.source().contains("local function ready_head"));
        assert!(s.claim.source().contains("ZRANGE"));
        assert_eq!(s.claim.sha().len(), 40);
        assert_ne!(s.claim.sha(), s.ack.sha());
        for script in [&s.enqueue, &s.enqueue_once, &s.schedule_fire] {
            assert!(script.source().contains("local function enqueue_batch"));
        }
        assert_ne!(s.enqueue.sha(), s.enqueue_once.sha());
    }

    impl Scripts {
        fn all(&self) -> Vec<&Script> {
            vec![
                &self.enqueue,
                &self.enqueue_once,
                &self.claim,
                &self.recover_claim,
                &self.lease_fate,
                &self.ack,
                &self.ack_many,
                &self.extend,
                &self.release,
                &self.give_back,
                &self.fail,
                &self.reap,
                &self.stats,
                &self.peek,
                &self.item,
                &self.redrive,
                &self.redrive_item,
                &self.remove_item,
                &self.purge,
                &self.queue_delete,
                &self.hook_expire,
                &self.hook_due,
                &self.hook_dangle,
                &self.hook_snapshot,
                &self.hook_poison,
                &self.hook_postpone,
                &self.time,
                &self.limits_set,
                &self.limits_get,
                &self.schedule_fire,
                &self.schedule_put,
                &self.schedule_get,
                &self.schedule_index,
                &self.queue_prune,
                &self.queues_registry,
                &self.queues_register,
                &self.migrate,
                &self.cancel,
                &self.pause,
                &self.run_now,
                &self.run_all_now,
                &self.progress,
                &self.workers,
                &self.retention,
                &self.finished,
                &self.collect,
                &self.events_on,
            ]
        }
    }

    #[test]
    fn the_claim_reads_the_limits_with_the_cores_numbers() {
        let scripts = Scripts::new();
        let src = scripts.claim.source();
        assert!(src.contains("local function limits_admit"));
        let retry = leaseq_core::queue_limits::CONCURRENCY_RETRY.as_millis();
        assert!(src.contains(&format!("local CONCURRENCY_RETRY_MS = {retry}\n")));
        let max = leaseq_core::queue_limits::MAX_LIMIT;
        assert!(src.contains(&format!("local LIMIT_MAX = {max}\n")));
        let window = leaseq_core::queue_limits::MAX_RATE_WINDOW.as_millis();
        assert!(src.contains(&format!("local WINDOW_MAX_MS = {window}\n")));
    }

    #[test]
    fn the_reap_knows_the_cores_lease_horizon() {
        let horizon = leaseq_core::limits::LEASE_HORIZON.as_millis();
        let src = Scripts::new().reap.source().to_owned();
        assert!(src.contains(&format!("local LEASE_HORIZON_MS = {horizon}\n")));
        assert!(src.contains(&format!("'{}'", leaseq_core::Repair::PAST_HORIZON)));
    }

    #[test]
    fn only_the_enqueues_are_refused_when_the_server_is_full() {
        let s = Scripts::new();
        for script in s.all() {
            let grows = matches!(
                script.name(),
                "enqueue"
                    | "enqueue_once"
                    | "schedule_fire"
                    | "schedule_put"
                    | "schedule_index"
                    | "queues_register"
                    | "workers"
            );
            assert_eq!(
                !script.source().starts_with(ALLOW_OOM),
                grows,
                "{}",
                script.name()
            );
            // A shebang is only valid on the first line.
            assert_eq!(
                script.source().matches("#!lua").count(),
                usize::from(!grows)
            );
        }
    }

    #[test]
    fn no_script_unpacks_a_read_result() {
        // `unpack` over a reply of unbounded size fails past ~8000 values;
        // the only `unpack`s allowed are the bounded slices in
        // `call_chunked` and `read_chunked`, and slices of `ARGV` (at most
        // `MAX_ACK_BATCH` values, checked by the client) and of the wake-up
        // markers (at most `NOTIFY_CAP`).
        let s = Scripts::new();
        for script in [
            &s.enqueue,
            &s.enqueue_once,
            &s.claim,
            &s.recover_claim,
            &s.ack_many,
            &s.reap,
            &s.redrive,
            &s.purge,
            &s.peek,
        ] {
            let src = script.source();
            let all = src.matches("unpack(").count();
            let bounded = src.matches("unpack(list, i, j)").count()
                + src.matches("unpack(ARGV, ").count()
                + src.matches("unpack(ONES, 1, n)").count();
            assert_eq!(all, bounded, "{}", script.name());
            if src.contains("unpack(list, i, j)") {
                assert!(src.contains("local CALL_CHUNK = 512"), "{}", script.name());
            }
        }
    }
}
