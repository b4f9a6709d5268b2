//! The key layout: every key of one queue shares the hash tag `{prefix:queue}`,
//! so every script touches one slot (valid on Redis Cluster).

use leaseq_core::{Error, ItemId, LeaseToken, QueueName, Result};

/// The most takeover traces (`{p:q}:taken`) a queue keeps: a reap of more
/// expired leases within [`leaseq_core::limits::FINISH_MEMORY`] drops the
/// oldest, and `lease_fate` answers Lost for a lease that expired before
/// the newest one dropped (never Finished for a lease a reap took).
pub const MAX_TAKEOVER_TRACES: usize = 65_536;

/// The keys of one queue (key layout 2).
///
/// | key | type | holds |
/// |-----|------|-------|
/// | `{p:q}:items` | hash | one field per item: id → `enq,max,pri,payload` (enqueue time in ms of the server's `TIME`, max attempts, priority, payload), written once at enqueue |
/// | `{p:q}:ready:fifo` | list | Ready ids (decimal) of priority 0 never delayed nor requeued, appended at enqueue, so in id order |
/// | `{p:q}:ready:ranked` | sorted set | every other Ready id; score `-priority`, ties by id (FIFO) |
/// | `{p:q}:scheduled:due` | sorted set | Scheduled ids; score = due time (ms) |
/// | `{p:q}:lease:groups` | sorted set | lease groups; score = the group's lease expiry (ms) |
/// | `{p:q}:lease:tokens` | hash | id → the token of its lease: present exactly while the item is Leased |
/// | `{p:q}:lease:ids` | hash | group → the ids leased in it (`id,id,…`) |
/// | `{p:q}:lease:live` | hash | group → how many of its leases are live |
/// | `{p:q}:lease:moved` | hash | id → the group of a lease extended out of its claim's group (its own token) |
/// | `{p:q}:taken` | sorted set | takeover traces ([`leaseq_core::LeaseTraces::Takeovers`]): `<id>:<token>` of each lease a reap took → when (ms); kept [`leaseq_core::limits::FINISH_MEMORY`], at most [`MAX_TAKEOVER_TRACES`] (oldest dropped first), trimmed by each reap, `PEXPIRE` with the last; a claim drops the traces of the (id, token) pairs it leases |
/// | `{p:q}:taken:floor` | string | the newest trace the cap dropped (ms), kept as long: a lease that expired at or before it and has no trace is answered Lost, not Finished |
/// | `{p:q}:finished` | sorted set | an earlier version's finishing traces (`<id>:<token>` → when); while present (a minute after that version's last write) `lease_fate` answers by them; deleted with the queue |
/// | `{p:q}:attempts` | hash | id → attempts made (a Leased item: before its lease); absent = 0 |
/// | `{p:q}:errors` | hash | id → the last failure reason |
/// | `{p:q}:dedup:keys` | hash | id → its dedup key |
/// | `{p:q}:unique:for` | hash | id → its unique-for hold (ms) |
/// | `{p:q}:cancel` | hash | id → the token of the lease an operator asked to cancel ([`leaseq_core::Control::cancel`]); counts only while that token is the item's |
/// | `{p:q}:cancels` | stream | one entry (`id`) per cancel request, for the workers' cancel signal ([`leaseq_core::Control::cancel_signal`]); at most about 64 entries |
/// | `{p:q}:retention` | hash | the queue's retention policy ([`leaseq_core::History::set_retention`]): ending (`completed`, `cancelled`) → `age_ms,count` (an empty bound: none); no field: that ending is not kept; no key: the default, nothing kept. Kept by purge |
/// | `{p:q}:done` | hash | kept finished items ([`leaseq_core::History`]): id → `ending,finished,enqueued,attempts,elen,rlen,` then the last error (`elen` bytes), the result (`rlen` bytes; an empty length: none) and the payload |
/// | `{p:q}:done:completed`, `{p:q}:done:cancelled` | sorted set | the kept items of each ending; score = finish time (ms), so collection reads the oldest first and only what it removes |
/// | `{p:q}:ends` | stream | one entry per script that kept an ending, for the finished signal ([`leaseq_core::History::finished_signal`]); at most about 64 entries |
/// | `{p:q}:events` | stream | job events ([`leaseq_core::Events`]): per entry, one field `e` per event, its [`leaseq_core::events::JobEvent::to_wire`] text, in the order of the changes; written only while `{p:q}:events:on` exists; about 4,096 entries, and gone 10 minutes after its last |
/// | `{p:q}:events:on` | string | present while a process follows the queue's events: set with an expiry of 30 s, which each such process renews every 10 s |
/// | `{p:q}:progress` | hash | id → the token of the lease that recorded it, then the progress value ([`leaseq_core::Control::progress`]); shown only while that token is the item's |
/// | `{p:q}:dead:order` | sorted set | Dead ids; score = death order |
/// | `{p:q}:dead:at` | hash | id → when the Dead item died (ms), which [`leaseq_core::History::collect`] ages dead letters by |
/// | `{p:q}:retention:dead` | string | the queue's bound on dead letters ([`leaseq_core::Retention::dead`]): `age_ms,count` (an empty bound: none); no key: kept for ever. Kept by purge |
/// | `{p:q}:completed` | string | items completed since the queue was made or deleted ([`leaseq_core::QueueStats::completed`]): every ack, `ack_many` and complete adds to it in its own script; kept by purge |
/// | `{p:q}:seq` | string | the id counter: the last id handed out |
/// | `{p:q}:idmark` | string | a second copy of the id counter, written with it (see [`KeyLayout::id_mark`]) |
/// | `{p:q}:seq:run` | string | the server's replication id when the id counter was last written (see [`KeyLayout::id_run`]) |
/// | `{p:q}:seq:deleted` | string | after `delete_queue`, for [`leaseq_core::limits::REQUEST_MEMORY`]: the queue's last id then (see [`KeyLayout::deleted_up_to`]) |
/// | `{p:q}:dseq` | string | the death-order counter |
/// | `{p:q}:dedup` | hash | dedup key → id of the item holding it |
/// | `{p:q}:held`, `{p:q}:heldid` | sorted set, hash | unique-for holds: dedup key → held until (ms), and → the acked id |
/// | `{p:q}:notify` | list | wake-up markers for idle workers (at most 32) |
/// | `{p:q}:limits` | hash | the queue's global limits: `conc`, `rate`, `per` (ms), and the rate window's `win` (start, ms) and `used`; and `paused`, present while the queue is paused ([`leaseq_core::Control::pause`]) |
/// | `{p:q}:req:<request>` | string | the results of one `enqueue_once` request, kept for [`leaseq_core::limits::REQUEST_MEMORY`] (`PX`) |
/// | `{p:q}:listed` | string | present while the queue is in the registry of queues: the token it was registered under (see [`leaseq_core::Backend::queues`]) |
/// | `{p:q}:listgen` | string | how many times the queue left the listing (a listing found it empty) |
///
/// A claim's leases form one **group**, named by the family of its tokens
/// (the first 24 of a token's 32 hex digits): a claim adds one member to
/// `lease:groups`, not one per lease, and a reap reads expired groups
/// only. A lease extended while others of its claim are live moves into a
/// group of its own. The hashes with one field per item carry a field `~`
/// with a value longer than 64 bytes, so the server keeps them hash tables
/// (a wide `HMGET` into a listpack scans it once per field).
///
/// Sorted-set members are ids written as 20 zero-padded decimal digits
/// ([`KeyLayout::member`]), so members with equal scores sort by id.
///
/// ```
/// use leaseq_core::{ItemId, QueueName};
/// use leaseq_redis::keys::KeyLayout;
/// let keys = KeyLayout::new("leaseq", &QueueName::new("mail")?)?;
/// assert_eq!(keys.items(), "{leaseq:mail}:items");
/// assert_eq!(keys.ready(), "{leaseq:mail}:ready:ranked");
/// let request = leaseq_core::LeaseToken::from_u128(0xab);
/// assert_eq!(keys.request(request), "{leaseq:mail}:req:000000000000000000000000000000ab");
/// assert_eq!(KeyLayout::member(ItemId::new(7)), "00000000000000000007");
/// # Ok::<(), leaseq_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    tag: String,
}

impl KeyLayout {
    /// The layout for `queue` under `prefix` (checked like a queue name).
    pub fn new(prefix: &str, queue: &QueueName) -> Result<Self> {
        check_prefix(prefix)?;
        Ok(KeyLayout {
            tag: format!("{{{prefix}:{}}}", queue.as_str()),
        })
    }

    /// The hash tag, `{prefix:queue}`; every key of the queue starts with it.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The Ready ids of priority 0 never delayed nor requeued, in id
    /// order (a list of decimal ids).
    pub fn ready_fifo(&self) -> String {
        self.key("ready:fifo")
    }

    /// Every other Ready id (a sorted set).
    pub fn ready(&self) -> String {
        self.key("ready:ranked")
    }

    /// The Scheduled index.
    pub fn scheduled(&self) -> String {
        self.key("scheduled:due")
    }

    /// The lease groups (a sorted set: group, expiry).
    pub fn lease_groups(&self) -> String {
        self.key("lease:groups")
    }

    /// The Dead index.
    pub fn dead(&self) -> String {
        self.key("dead:order")
    }

    /// The item records (a hash: id, `enq,max,pri,payload`).
    pub fn items(&self) -> String {
        self.key("items")
    }

    /// The tokens of live leases (a hash: id, token).
    pub fn lease_tokens(&self) -> String {
        self.key("lease:tokens")
    }

    /// Attempts made (a hash: id, count; absent is 0).
    pub fn attempts(&self) -> String {
        self.key("attempts")
    }

    /// The id counter.
    pub fn seq(&self) -> String {
        self.key("seq")
    }

    /// A second copy of the id counter, written in the same script as
    /// [`KeyLayout::seq`]: a counter deleted or set back on its own is
    /// detected (and re-seeded past the highest id in use) before an
    /// enqueue writes anything.
    pub fn id_mark(&self) -> String {
        self.key("idmark")
    }

    /// The server's replication id (`master_replid`) when an enqueue last
    /// wrote the id counter. An enqueue on a server with another one (a
    /// promoted replica, a restart) may meet a counter from before ids
    /// that were handed out and lost, and starts its ids 2^32 above it
    /// (see the crate docs, "Ids"). The scripts name it `K_SEQ .. ':run'`.
    pub fn id_run(&self) -> String {
        self.key("seq:run")
    }

    /// Written by `delete_queue` with the queue's last id, and expiring
    /// with the `enqueue_once` records of the deleted queue: a record that
    /// names only ids up to it predates the delete, and its request counts
    /// as new. The scripts name it `K_DELETED`.
    pub fn deleted_up_to(&self) -> String {
        self.key("seq:deleted")
    }

    /// The death-order counter.
    pub fn dead_seq(&self) -> String {
        self.key("dseq")
    }

    /// The completion counter ([`leaseq_core::QueueStats::completed`]).
    pub fn completed(&self) -> String {
        self.key("completed")
    }

    /// When each Dead item died (a hash: id, ms).
    pub fn dead_times(&self) -> String {
        self.key("dead:at")
    }

    /// The bound on dead letters ([`leaseq_core::Retention::dead`]).
    pub fn dead_retention(&self) -> String {
        self.key("retention:dead")
    }

    /// The dedup hash.
    pub fn dedup(&self) -> String {
        self.key("dedup")
    }

    /// The takeover traces (see the table above).
    pub fn taken(&self) -> String {
        self.key("taken")
    }

    /// An earlier version's finishing traces (see the table above), which
    /// `lease_fate` reads while they last and `delete_queue` deletes.
    pub fn finished_before_takeovers(&self) -> String {
        self.key("finished")
    }

    /// The floor of the takeover traces (see the table above).
    pub fn taken_floor(&self) -> String {
        self.key("taken:floor")
    }

    /// The wake-up list.
    pub fn notify(&self) -> String {
        self.key("notify")
    }

    /// The stream of cancel requests the workers' cancel signal reads.
    pub fn cancel_stream(&self) -> String {
        self.key("cancels")
    }

    /// The stream of the queue's job events ([`leaseq_core::Events`]).
    pub fn events_stream(&self) -> String {
        self.key("events")
    }

    /// Present while some process follows the queue's job events: the
    /// scripts write events only then. The scripts name it
    /// `QUEUE_TAG .. 'events:on'`.
    pub fn events_gate(&self) -> String {
        self.key("events:on")
    }

    /// The queue's retention policy ([`leaseq_core::History`]): a hash,
    /// ending → `age_ms,count`; absent while the queue keeps nothing.
    pub fn retention(&self) -> String {
        self.key("retention")
    }

    /// The kept finished items (a hash: id, record).
    pub fn done(&self) -> String {
        self.key("done")
    }

    /// The stream of kept endings the finished signal reads.
    pub fn ends_stream(&self) -> String {
        self.key("ends")
    }

    /// The queue's global limits ([`leaseq_core::QueueLimits`]), its
    /// rate window's count, and its pause ([`leaseq_core::Control::pause`]),
    /// all read by the claim in one command. Kept by purge.
    pub fn limits(&self) -> String {
        self.key("limits")
    }

    /// Cancel requests of leased items (a hash: id, the token of the lease
    /// an operator asked to cancel).
    pub fn cancel_requests(&self) -> String {
        self.key("cancel")
    }

    /// Progress of leased items (a hash: id, the recording lease's token
    /// followed by the value).
    pub fn progress(&self) -> String {
        self.key("progress")
    }

    /// Present while the queue is in the registry of queues: the token
    /// its registration wrote there. Deleted (with
    /// [`KeyLayout::listing_generation`] raised) by a listing that finds
    /// the queue empty.
    pub fn listed(&self) -> String {
        self.key("listed")
    }

    /// How many times a listing found the queue empty and took it out;
    /// an enqueue registers the queue again under the current count.
    pub fn listing_generation(&self) -> String {
        self.key("listgen")
    }

    /// The key that remembers one `enqueue_once` request's results: its
    /// id as 32 lowercase hex digits after the queue's hash tag, so it
    /// hashes to the queue's slot.
    pub fn request(&self, request: LeaseToken) -> String {
        format!("{}:req:{request}", self.tag)
    }

    /// How an id is written as an index member.
    pub fn member(id: ItemId) -> String {
        format!("{:020}", id.get())
    }

    /// The Redis Cluster hash slot of every key of the queue (all carry
    /// the same hash tag).
    pub fn slot(&self) -> u16 {
        key_slot(self.tag.as_bytes())
    }

    /// The key every script declares first (its `KEYS[1]`, the queue's
    /// [`KeyLayout::ready_fifo`]): it routes the call to the queue's slot.
    /// Scripts name the queue's other keys after [`KeyLayout::key_prefix`]
    /// (`scripts/common.lua`, which a unit test keeps in step with this
    /// layout).
    pub fn script_keys(&self) -> Vec<String> {
        vec![self.ready_fifo()]
    }

    /// What every script gets as `ARGV[1]`: the prefix of the queue's keys,
    /// `{prefix:queue}:`.
    pub fn key_prefix(&self) -> String {
        self.key("")
    }

    /// The indexes of key layout 1 (one hash per item), which no script of
    /// this layout reads: every script refuses a queue that holds any of
    /// them (the crate docs, "Upgrading").
    pub fn layout1_indexes(&self) -> [String; 4] {
        ["ready", "scheduled", "leased", "dead"].map(|s| self.key(s))
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.tag)
    }
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) mod 16384 of the
/// hash tag (the part between the first `{` and the next `}`, when not
/// empty), else of the whole key.
///
/// ```
/// use leaseq_redis::keys::key_slot;
/// assert_eq!(key_slot(b"123456789"), 0x31c3);
/// assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
/// ```
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16_xmodem(hashed) % 16_384
}

fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// A key prefix is 1 to 64 bytes of ASCII letters, digits, `-`, `_`, `.`, `:`
/// (no braces, so the hash tag stays intact, and no glob characters).
pub(crate) fn check_prefix(prefix: &str) -> Result<()> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
    if prefix.is_empty() || prefix.len() > 64 || !prefix.chars().all(ok_char) {
        return Err(Error::invalid(format!(
            "key prefix {prefix:?} must be 1 to 64 ASCII letters, digits, '-', '_', '.', ':'"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_carries_the_hash_tag() {
        let q = QueueName::new("q1").expect("valid");
        let k = KeyLayout::new("p", &q).expect("valid");
        for key in k.script_keys() {
            assert!(key.starts_with("{p:q1}:"), "{key}");
        }
        assert_eq!(k.key_prefix(), "{p:q1}:");
        for key in k.layout1_indexes() {
            assert!(!k.script_keys().contains(&key), "{key}");
        }
        let req = k.request(LeaseToken::random());
        assert!(req.starts_with("{p:q1}:req:"), "{req}");
        assert_eq!(key_slot(req.as_bytes()), k.slot());
        // The scripts name these two after the item prefix: the same keys.
        assert_eq!(k.listed(), "{p:q1}:listed");
        assert_eq!(k.listing_generation(), "{p:q1}:listgen");
        let prelude = include_str!("scripts/common.lua");
        for key in [
            k.ready(),
            k.scheduled(),
            k.lease_groups(),
            k.dead(),
            k.items(),
            k.lease_tokens(),
            k.attempts(),
            k.cancel_requests(),
            k.cancel_stream(),
            k.progress(),
            k.retention(),
            k.done(),
            k.ends_stream(),
            k.completed(),
            k.dead_times(),
            k.dead_retention(),
        ] {
            let name = key.trim_start_matches(k.tag()).trim_start_matches(':');
            assert!(prelude.contains(&format!("qkey('{name}')")), "{name}");
        }
        assert!(prelude
            .contains("local K_LISTED, K_LISTGEN = QUEUE_TAG .. 'listed', QUEUE_TAG .. 'listgen'"));
        for key in [
            k.events_stream(),
            k.events_gate(),
            k.taken(),
            k.taken_floor(),
            k.finished_before_takeovers(),
        ] {
            let name = key.trim_start_matches(k.tag()).trim_start_matches(':');
            assert!(
                prelude.contains(&format!("QUEUE_TAG .. '{name}'")),
                "{name}"
            );
        }
        // The scripts' cap on takeover traces is this crate's.
        assert!(prelude.contains(&format!("'taken:floor', {MAX_TAKEOVER_TRACES}\n")));
    }

    #[test]
    fn the_enqueue_scripts_name_the_replication_id_key_as_the_layout_does() {
        let keys = KeyLayout::new("p", &QueueName::new("q").expect("name")).expect("layout");
        assert_eq!(keys.id_run(), format!("{}:run", keys.seq()));
        let scripts = crate::scripts::Scripts::new();
        for s in [
            &scripts.enqueue,
            &scripts.enqueue_once,
            &scripts.schedule_fire,
        ] {
            assert!(
                s.source().contains("local K_RUN = K_SEQ .. ':run'"),
                "{}",
                s.name()
            );
        }
        // A deleted queue leaves no key behind.
        assert!(scripts.queue_delete.source().contains("K_SEQ .. ':run'"));
    }

    #[test]
    fn members_sort_like_ids() {
        let a = KeyLayout::member(ItemId::new(9));
        let b = KeyLayout::member(ItemId::new(10));
        let c = KeyLayout::member(ItemId::new(u64::MAX));
        assert!(a < b && b < c);
        assert_eq!(c.len(), 20);
    }

    #[test]
    fn prefixes_with_braces_or_globs_are_rejected() {
        let q = QueueName::new("q").expect("valid");
        for bad in ["", "a{b", "x}", "a*", "a?", "a[b]", "a b"] {
            assert!(KeyLayout::new(bad, &q).is_err(), "{bad:?}");
        }
    }
}
