-- leaseq: shared prelude of every script (prepended at build time).
-- Key layout 2 (src/keys.rs documents every key). KEYS[1] is the queue's
-- `ready:fifo` (it routes the call to the queue's slot); KEYS[2] and on are
-- what a script adds (limits, a request...). ARGV[1] is the prefix of every
-- key of the queue, '{p:q}:'; script arguments start at ARGV[2]. The keys:
--   ready:fifo    list  Ready ids (decimal) of priority 0 never delayed nor
--                       requeued, appended at enqueue: in id order
--   ready:ranked  zset  every other Ready id: score -priority, member the
--                       20-digit id (so equal scores sort by id)
--   scheduled:due zset  Scheduled ids: score due time (ms)
--   lease:groups  zset  lease groups: member the group, score its expiry (ms)
--   dead:order    zset  Dead ids: score death order
--   dead:at       hash  id -> when it died (ms), for Retention::dead's age
--   seq, idmark   the id counter and a second copy of it (see
--                 scripts/enqueue_batch.lua); dseq: the death counter
--   dedup         hash  dedup key -> id; notify: list of wake-up markers
--   items         hash  id -> record 'enq,max,pri,payload', written once
--   lease:tokens  hash  id -> the token of its lease (present <=> Leased)
--   lease:ids     hash  group -> 'id,id,...' (the ids leased in it)
--   lease:live    hash  group -> how many of its leases are still live
--   lease:moved   hash  id -> the group of a lease that is not its family's
--                       group: extended out of it (the lease's own token),
--                       or claimed while that group held leases of another
--                       expiry ('family:expiry')
--   attempts      hash  id -> attempts made (a Leased item: before its
--                       lease); absent = 0
--   errors        hash  id -> the last failure reason
--   dedup:keys    hash  id -> its dedup key
--   unique:for    hash  id -> its unique-for hold (ms)
--   cancel        hash  id -> the token of the lease an operator asked to
--                       cancel (leaseq_core::Control::cancel): counts only
--                       while that token is the item's
--   progress      hash  id -> the token of the lease that recorded it, then
--                       the progress value (32 hex digits, then the value):
--                       shown only while that token is the item's
--   limits        hash  the queue's throttles (scripts/limits.lua) and its
--                       pause: field `paused` present while it is paused
--   completed     string  items completed since the queue was made or
--                       deleted (leaseq_core::QueueStats::completed)
--
-- A claim's leases form one group, named by their tokens' family (the first
-- 24 of a token's 32 hex digits): one `lease:groups` member per claim, so a
-- claim and its acks touch one sorted-set member, not one per lease.
local QUEUE_TAG = ARGV[1]
local K_FIFO = KEYS[1]
local function qkey(name) return QUEUE_TAG .. name end
-- One statement per key: a script names only the keys it uses (see
-- src/prelude.rs).
local K_READY = qkey('ready:ranked')
local K_SCHED = qkey('scheduled:due')
local K_GROUPS = qkey('lease:groups')
local K_DEAD = qkey('dead:order')
local K_SEQ = qkey('seq')
local K_DSEQ = qkey('dseq')
local K_DEDUP = qkey('dedup')
local K_NOTIFY = qkey('notify')
local K_MARK = qkey('idmark')
local K_ITEMS = qkey('items')
local K_TOK = qkey('lease:tokens')
local K_GIDS = qkey('lease:ids')
local K_GLIVE = qkey('lease:live')
local K_MOVED = qkey('lease:moved')
local K_ATT = qkey('attempts')
local K_ERR = qkey('errors')
local K_DK = qkey('dedup:keys')
local K_UF = qkey('unique:for')
local K_CANCEL = qkey('cancel')
-- A stream the workers' cancel signal reads (src/cancel_feed.rs).
local K_CANCELS = qkey('cancels')
local K_PROG = qkey('progress')
-- The first key a script adds after the queue's own (limits, a request...).
local K_EXTRA = KEYS[2]
-- After `delete_queue`, for as long as its `enqueue_once` records live: the
-- queue's last id then (scripts/queue_delete.lua, enqueue_once.lua).
local K_DELETED = K_SEQ .. ':deleted'
local NOTIFY_CAP = 32
local PROMOTE_BATCH = 500
-- Hashes with one field per item carry this field, with a value longer than
-- `hash-max-listpack-value` (64 bytes), so the server keeps them hash
-- tables from the start: a batch's HSET/HMGET of 100 fields into a listpack
-- scans it once per field.
local WIDE_FIELD = '~'
local WIDE = 'leaseq: keeps this hash a hash table (a value longer than 64 bytes) ....'

-- The index keys of layout 1 (one hash per item). Probed first, with one
-- EXISTS:
-- - On Redis Cluster, while the slot is being migrated, some of its keys
--   may sit on the other node already, and a command on one of them would
--   fail the script halfway through. A multi-key EXISTS of keys that do not
--   exist is refused while the slot migrates (or imports), so the script
--   stops here before any write, with TRYAGAIN: the client sends it again.
-- - A queue that still holds layout 1 keys is refused: its items would be
--   invisible to these scripts (the crate docs, "Upgrading"). Only
--   scripts/migrate.lua, which declares the key '{p:q}:layout1:migrating'
--   second, runs on one.
do
  local probe = redis.pcall('EXISTS', QUEUE_TAG .. 'ready', QUEUE_TAG .. 'scheduled', QUEUE_TAG .. 'leased',
                            QUEUE_TAG .. 'dead')
  if type(probe) == 'table' and probe.err then
    return redis.error_reply('TRYAGAIN leaseq: the slot of ' .. K_READY .. ' is migrating: ' .. probe.err)
  end
  if probe > 0 and KEYS[2] ~= QUEUE_TAG .. 'layout1:migrating' then
    return redis.error_reply('LEASEQ_CORRUPT queue ' .. QUEUE_TAG .. ' holds data in key layout 1 (' .. QUEUE_TAG
      .. 'ready, scheduled, leased or dead): drain it with the version that wrote it (the crate docs, "Upgrading")')
  end
end

-- The server's clock in ms: the only clock that decides leases.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fmt_int(n) return string.format('%d', n) end
-- The negation of a decimal integer string (the Ready score of a priority).
-- Priority 0 gives '0', never '-0': the server stores the score -0 as text
-- in a small sorted set (a listpack) and parses it back with strtod at every
-- comparison, where 0 is stored as an integer. The two compare equal.
local function neg(s)
  if s == '0' then return s end
  if string.sub(s, 1, 1) == '-' then return string.sub(s, 2) end
  return '-' .. s
end
-- Sorted-set members are zero-padded ids, so equal scores sort by id (FIFO).
local function member(id) return string.format('%020d', id) end
local function key_type(k) return redis.call('TYPE', k)['ok'] end

-- Field limits: what an item must hold to be used. src/decode.rs checks
-- the same limits on every reply (a unit test keeps the two equal):
-- - attempts: 0 to ATT_MAX (i32::MAX); an item that is not Dead at most
--   ATT_MAX - 1 (a Leased one's lease is attempt stored + 1);
-- - max attempts: 1 to MAX_ATT_MAX (i32::MAX, leaseq_core::limits::MAX_ATTEMPTS);
-- - priority: PRI_MIN to PRI_MAX (an i32);
-- - the payload present (a record has its three commas).
-- Each number is a decimal integer as the scripts write it (an optional '-'
-- and digits), nothing else.
local ATT_MAX = 2147483647
local MAX_ATT_MAX = 2147483647
local PRI_MIN, PRI_MAX = -2147483648, 2147483647
-- Ids are exact up to 2^53 - 1 (Lua numbers are doubles).
local ID_MAX = 9007199254740991

-- `s` (a field or key value: a string, or false when missing) as an integer
-- in [lo, hi], or nil. `tonumber` alone would also take '1e3', '0x10', ' 5',
-- '1.5', 'inf' and 'nan'.
local function int_field(s, lo, hi)
  if type(s) ~= 'string' or #s > 20 or not string.find(s, '^%-?%d+$') then return nil end
  local n = tonumber(s)
  if n == nil or n < lo or n > hi then return nil end
  return n
end

-- The id sorted-set member `m` names; nil when `m` is not `member(id)` of
-- an id from 1 to ID_MAX (one `tonumber` and a format back: only the
-- canonical 20 digits round-trip).
local function member_id(m)
  local id = tonumber(m)
  if not id or id < 1 or id > ID_MAX or member(id) ~= m then return nil end
  return id
end

-- The id a `ready:fifo` entry or a group's id list names: a canonical
-- decimal id, or nil.
local function decimal_id(s)
  local id = int_field(s, 1, ID_MAX)
  if not id or fmt_int(id) ~= s then return nil end
  return id
end

-- The state a read shows for an item whose record says `st` and whose due
-- time is `due` (a number or nil): a Scheduled item past its due time is
-- Ready, moved or not.
local function as_read(st, due, now)
  if st == 'scheduled' and due and due <= now then return 'ready' end
  return st
end

-- A value for a problem report: quoted and cut short, or 'missing'.
local function shown(s)
  if type(s) ~= 'string' then return 'missing' end
  if #s > 40 then s = string.sub(s, 1, 40) .. '...' end
  return "'" .. s .. "'"
end

-- A record `enq,max,pri,payload` checked: { enq, max, pri (the texts), the
-- payload's offset }, or nil and why it cannot be used. Records of a batch
-- mostly share their prefix (one enqueue time, one max and priority): the
-- last prefix found valid is compared first, with one `string.sub`.
local REC_OK = {}
local LAST_PRE, LAST_OK, LAST_LEN = nil, nil, 0
local function parse_record(rec)
  if type(rec) ~= 'string' then return nil, 'record is missing' end
  if LAST_PRE and string.sub(rec, 1, LAST_LEN) == LAST_PRE then return LAST_OK end
  local pre = string.match(rec, '^[^,]*,[^,]*,[^,]*,')
  if not pre then
    if string.find(rec, '^[^,]*,[^,]*,[^,]*$') then return nil, 'payload field is missing' end
    return nil, 'record ' .. shown(rec) .. ' is not enq,max,pri,payload'
  end
  local ok = REC_OK[pre]
  if not ok then
    local e, m, p = string.match(pre, '^([^,]*),([^,]*),([^,]*),$')
    if not int_field(e, 0, ID_MAX) then return nil, 'enqueue time field holds ' .. shown(e) end
    if not int_field(m, 1, MAX_ATT_MAX) then
      return nil, 'max attempts field holds ' .. shown(m) .. ' (valid: 1 to ' .. fmt_int(MAX_ATT_MAX) .. ')'
    end
    if not int_field(p, PRI_MIN, PRI_MAX) then
      return nil, 'priority field holds ' .. shown(p) .. ' (valid: ' .. fmt_int(PRI_MIN) .. ' to ' .. fmt_int(PRI_MAX) .. ')'
    end
    ok = { e, m, p, #pre + 1 }
    REC_OK[pre] = ok
  end
  LAST_PRE, LAST_OK, LAST_LEN = pre, ok, #pre
  return ok
end

-- Attempts as stored (text, or false when absent: 0), checked for an item
-- that is not Dead: a number, or nil and the problem.
local ATT_OK = {}
local function live_attempts(a)
  if not a then return 0 end
  local n = ATT_OK[a]
  if n then return n end
  n = int_field(a, 0, ATT_MAX - 1)
  if not n then return nil, 'attempts field holds ' .. shown(a) .. ' (valid: 0 to ' .. fmt_int(ATT_MAX - 1) .. ')' end
  ATT_OK[a] = n
  return n
end

-- Why an item with record `rec` and stored attempts `a` cannot be used, or
-- nil (and the parsed record, the attempts) when it can.
local function unusable(rec, a)
  local r, problem = parse_record(rec)
  if not r then return problem end
  local n
  n, problem = live_attempts(a)
  if not n then return problem end
  return nil, r, n
end

-- Runs `cmd` (with `head` first when given) over the values of `list`, at
-- most CALL_CHUNK values per call: one command for a whole batch instead of
-- one per item. `unpack` only ever sees a bounded slice of a list the script
-- built itself. Returns the sum of the integer replies.
local CALL_CHUNK = 512
local function call_chunked(cmd, head, list)
  local total, n, i = 0, #list, 1
  while i <= n do
    local j = math.min(i + CALL_CHUNK - 1, n)
    local r
    if head then
      r = redis.call(cmd, head, unpack(list, i, j))
    else
      r = redis.call(cmd, unpack(list, i, j))
    end
    total = total + (tonumber(r) or 0)
    i = j + 1
  end
  return total
end

-- The values of `cmd head list...` (HMGET, ZMSCORE) for a list of any
-- length, in chunks of CALL_CHUNK, as one array (a single chunk's reply as
-- it came: no copy).
local function read_chunked(cmd, head, list)
  local out, n, i = nil, #list, 1
  while i <= n do
    local j = math.min(i + CALL_CHUNK - 1, n)
    local r = redis.call(cmd, head, unpack(list, i, j))
    if out then
      for k = 1, #r do out[#out + 1] = r[k] end
    else
      out = r
    end
    i = j + 1
  end
  return out or {}
end

-- HSET of field/value pairs (a list it appends to) into a hash with one
-- field per item, kept a hash table: the wide field goes with them.
-- Returns how many fields are new (the wide field counts when it is).
local function hset_wide(key, pairs)
  if #pairs == 0 then return 0 end
  pairs[#pairs + 1] = WIDE_FIELD
  pairs[#pairs + 1] = WIDE
  return call_chunked('HSET', key, pairs)
end

-- ZADD of a batch's score/member pairs, the last pair first. A batch's
-- members ascend, and a small sorted set (a listpack, up to 128 members by
-- default) finds each insert's place by a scan from its head: highest
-- first, each scan stops at the batch's members added before it.
local function zadd_batch(key, pairs)
  local rev, n = {}, #pairs
  for i = n - 1, 1, -2 do
    rev[n - i] = pairs[i]
    rev[n - i + 1] = pairs[i + 1]
  end
  return call_chunked('ZADD', key, rev)
end

-- Refuses to run (before any write) when one of the structural keys given
-- (the ones the script touches) has the wrong type: a list, a sorted set
-- or a hash, as the name says; the counters are strings.
local function guard(...)
  for _, k in ipairs({ ... }) do
    local got = key_type(k)
    if got ~= 'none' then
      local want = 'hash'
      if k == K_FIFO then
        want = 'list'
      elseif k == K_READY or k == K_SCHED or k == K_GROUPS or k == K_DEAD then
        want = 'zset'
      elseif k == K_SEQ or k == K_DSEQ or k == K_MARK then
        want = 'string'
      end
      if got ~= want then
        return redis.error_reply('LEASEQ_CORRUPT key ' .. k .. ' holds a ' .. got .. ', expected a ' .. want)
      end
    end
  end
  return nil
end

-- Refuses (an error reply) the first of `kws`, pairs { key, type }, whose
-- key holds another type; nil when none does (a missing key passes).
local function guard_types(kws)
  for _, kw in ipairs(kws) do
    local got = key_type(kw[1])
    if got ~= 'none' and got ~= kw[2] then
      return redis.error_reply('LEASEQ_CORRUPT key ' .. kw[1] .. ' holds a ' .. got .. ', expected a ' .. kw[2])
    end
  end
  return nil
end

-- `guard` of every key that holds items, their state or their leases
-- (what moving an item between states may touch), and `...`.
local STATE_KEYS = { K_FIFO, K_READY, K_SCHED, K_GROUPS, K_DEAD, K_DSEQ, K_ITEMS, K_TOK, K_GIDS, K_GLIVE, K_MOVED,
                     K_ATT, K_ERR }
local function guard_all(...)
  return guard(K_FIFO, K_READY, K_SCHED, K_GROUPS, K_DEAD, K_DSEQ, K_ITEMS, K_TOK, K_GIDS, K_GLIVE, K_MOVED,
               K_ATT, K_ERR, ...)
end
-- `guard_all` of the keys the script has not read yet (`read[key]` set):
-- a read of a key of the wrong type has already failed the script.
local function guard_unread(read)
  for _, k in ipairs(STATE_KEYS) do
    if not read[k] then
      local bad = guard(k)
      if bad then return bad end
    end
  end
  return nil
end

-- A coalesced wake-up hint for idle workers, at most NOTIFY_CAP markers;
-- never fails the script. A full list is left as it is: a busy queue's
-- enqueues then write nothing here. A key of another type is replaced.
local ONES = {}
for i = 1, NOTIFY_CAP do ONES[i] = '1' end
local function notify(n)
  if n <= 0 then return end
  local len = redis.pcall('LLEN', K_NOTIFY)
  if type(len) ~= 'number' then
    redis.call('DEL', K_NOTIFY)
    len = 0
  elseif len > NOTIFY_CAP then
    redis.call('LTRIM', K_NOTIFY, 0, NOTIFY_CAP - 1)
    len = NOTIFY_CAP
  end
  n = math.min(n, NOTIFY_CAP - len)
  if n > 0 then redis.call('LPUSH', K_NOTIFY, unpack(ONES, 1, n)) end
end

local function add_repair(repairs, index, id, problem)
  repairs[#repairs + 1] = { index, id, problem }
end


-- How many items the queue holds, and how many of them are Leased: every
-- write of these two hashes writes their wide field too.
local function item_count()
  return math.max(redis.call('HLEN', K_ITEMS) - 1, 0)
end
local function leased_count()
  return math.max(redis.call('HLEN', K_TOK) - 1, 0)
end

-- The group a lease (item `id_s`, token `token`) belongs to.
local function group_of(id_s, token)
  return redis.call('HGET', K_MOVED, id_s) or string.sub(token, 1, 24)
end

-- Counts `cnt[group]` leases of each group as ended; a group with none
-- left live leaves the index.
local function leave_groups(cnt)
  for g, c in pairs(cnt) do
    if redis.call('HINCRBY', K_GLIVE, g, -c) <= 0 then
      redis.call('ZREM', K_GROUPS, g)
      redis.call('HDEL', K_GIDS, g)
      redis.call('HDEL', K_GLIVE, g)
    end
  end
end

-- How many of the leases with tokens `toks` each group holds, a lease's
-- group being `moved[k]` when given (not false), else its token's family.
-- A batch is mostly one claim's leases: each token is first compared in
-- place with the family of the one before, no string made per lease.
local function group_counts(toks, moved)
  local cnt, fam, c = {}, nil, 0
  for k = 1, #toks do
    local x = moved and moved[k]
    if x then
      cnt[x] = (cnt[x] or 0) + 1
    else
      if not (fam and string.find(toks[k], fam, 1, true) == 1) then
        if fam then cnt[fam] = (cnt[fam] or 0) + c end
        fam, c = string.sub(toks[k], 1, 24), 0
      end
      c = c + 1
    end
  end
  if fam then cnt[fam] = (cnt[fam] or 0) + c end
  return cnt
end

-- Whether an operator asked to cancel the lease of item `id_s` with token
-- `token` (leaseq_core::Control::cancel): one read, before any write.
local function cancel_requested(id_s, token)
  return redis.call('HGET', K_CANCEL, id_s) == token
end

-- Job events (leaseq_core::Events, src/events.rs). A script that changes a
-- job tells it with `ev`, and `ev_flush` adds what it told, as
-- JobEvent::to_wire texts (field `e`, in the order told), to one entry of
-- the `events` stream, which the subscribed processes read. Only while
-- `events:on` exists: each process with a subscriber keeps it, with an
-- expiry. A queue nobody follows pays one EXISTS per call that has an
-- event to tell (none where another EXISTS asks for the gate too: it sets
-- EV), and nothing is built.
-- Placement: each local a closure of the prelude captures costs every
-- later closure that captures an earlier local (Lua walks the open
-- upvalues), so EV, `ev` and `ev_flush` are declared just before their
-- first users, their constants inside them, and the completion counter
-- (used by script bodies only) at the end.
-- nil: not asked yet; false: nobody listens; else this call's events.
local EV = nil

-- Before the leases of items `ids` (decimal) with tokens `toks` end:
-- forgets their cancel requests and progress, and returns the set of
-- those an operator asked to cancel (false: none). Costs one EXISTS while
-- no item of the queue has either; refuses (an error) a key of the wrong
-- type before its first write.
local function end_control(ids, toks)
  if EV ~= nil then
    if redis.call('EXISTS', K_CANCEL, K_PROG) == 0 then return false end
  elseif redis.call('EXISTS', K_CANCEL, K_PROG, QUEUE_TAG .. 'events:on') == 0 then
    -- Nobody follows the queue either (see `ev`).
    EV = false
    return false
  end
  local bad = guard(K_CANCEL, K_PROG)
  if bad then error(bad) end
  local marks = read_chunked('HMGET', K_CANCEL, ids)
  local set = false
  for i = 1, #ids do
    if marks[i] and marks[i] == toks[i] then
      set = set or {}
      set[ids[i]] = true
    end
  end
  call_chunked('HDEL', K_CANCEL, ids)
  call_chunked('HDEL', K_PROG, ids)
  return set
end

-- Ends the lease of item `id_s` (token `token`): out of its group and of
-- the token index, its cancel request and progress forgotten. The item is
-- then in no state index: the caller puts it in one.
local function end_lease(id_s, token)
  end_control({ id_s }, { token })
  leave_groups({ [group_of(id_s, token)] = 1 })
  redis.call('HDEL', K_TOK, id_s)
  redis.call('HDEL', K_MOVED, id_s)
end

-- Takeover traces (leaseq_core::LeaseTraces::Takeovers): a sorted set,
-- member '<id>:<token>' of each lease a reap took, score the ms it did.
-- Finishing calls leave none, so an ack costs nothing here; a reap is rare.
-- Kept TAKEN_KEEP ms (leaseq_core::limits::FINISH_MEMORY, a test checks):
-- each write trims what ran out, and the key expires with its last trace.
-- At most TAKEN_MAX are kept (a mass reap): past it the oldest go, and
-- `{p:q}:taken:floor` keeps the newest score that went, for as long. A lease
-- with no trace is told Finished only when it expired after the floor: one
-- a reap took then would still have its trace.
local K_TAKEN, TAKEN_KEEP = QUEUE_TAG .. 'taken', 60000
local K_TAKEN_FLOOR, TAKEN_MAX = QUEUE_TAG .. 'taken:floor', 65536

-- The floor of the takeover traces (ms, 0: none went), and whether it was
-- sound: a value that is not a number (bad data) reads as `now`, every
-- lease before it unknown, until a reap writes it anew.
local function taken_floor(now)
  local ok, v = pcall(redis.call, 'GET', K_TAKEN_FLOOR)
  if not ok then return now, false end
  if not v then return 0, true end
  local n = tonumber(v)
  if n then return n, true end
  return now, false
end

-- Leaves the trace of leases (ids[i], toks[i]) a reap took at `now`. A
-- trace key of another type (bad data) is replaced, and the floor raised
-- to `now`: the traces it held are unknown, so no earlier lease is told
-- Finished by their absence.
local function trace_taken(ids, toks, now)
  if #ids == 0 then return end
  local floor, sound = taken_floor(now)
  local was = sound and floor
  local t = key_type(K_TAKEN)
  if t ~= 'none' and t ~= 'zset' then
    redis.call('DEL', K_TAKEN)
    floor = now
  end
  local add = {}
  for i = 1, #ids do
    add[#add + 1] = now
    add[#add + 1] = ids[i] .. ':' .. toks[i]
  end
  redis.call('ZREMRANGEBYSCORE', K_TAKEN, '-inf', now - TAKEN_KEEP)
  call_chunked('ZADD', K_TAKEN, add)
  local over = redis.call('ZCARD', K_TAKEN) - TAKEN_MAX
  if over > 0 then
    local gone = redis.call('ZRANGE', K_TAKEN, over - 1, over - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYRANK', K_TAKEN, 0, over - 1)
    floor = math.max(floor, tonumber(gone[2]))
  end
  if floor ~= was then redis.call('SET', K_TAKEN_FLOOR, fmt_int(floor), 'PX', TAKEN_KEEP) end
  redis.call('PEXPIRE', K_TAKEN, TAKEN_KEEP)
end

-- Drops the traces of the leases a claim just made (`flat`: id, token,
-- id, token, ...): the same claim sent again reuses its tokens, and a
-- trace an earlier lease under one left would speak of the new lease. A
-- trace key of another type is left to the next reap, which replaces it.
local function untrace(flat)
  if key_type(K_TAKEN) ~= 'zset' then return end
  local members = {}
  for i = 2, #flat, 2 do members[#members + 1] = flat[i - 1] .. ':' .. flat[i] end
  call_chunked('ZREM', K_TAKEN, members)
end

-- Whether the lease (id_s, token), which expired at `held_until` (ms) and no
-- longer holds its item, was ended by its own call: no reap took it, as
-- far as the traces can tell at `now`. A queue still holding the finishing
-- traces of an earlier version (`{p:q}:finished`, gone within a minute of
-- its last write) is answered by those: only a trace there says Finished.
-- Trace keys of another type (bad data) answer no: Lost is the answer
-- that claims nothing.
local function own_end(id_s, token, held_until, now)
  local member = id_s .. ':' .. token
  if redis.call('EXISTS', QUEUE_TAG .. 'finished') == 1 then
    local at = tonumber(redis.call('ZSCORE', QUEUE_TAG .. 'finished', member))
    return at ~= nil and at > now - TAKEN_KEEP
  end
  if held_until <= now - TAKEN_KEEP then return false end
  local t = key_type(K_TAKEN)
  if t ~= 'none' and (t ~= 'zset' or redis.call('ZSCORE', K_TAKEN, member)) then return false end
  return held_until > taken_floor(now)
end

-- The expiry (ms) of the lease of item `id_s` with token `token`, or nil.
local function lease_expiry(id_s, token)
  return tonumber(redis.call('ZSCORE', K_GROUPS, group_of(id_s, token)))
end

local function set_attempts(id_s, n)
  if n == 0 then
    redis.call('HDEL', K_ATT, id_s)
  else
    redis.call('HSET', K_ATT, id_s, fmt_int(n))
  end
end

-- Into the ranked Ready index (never the fifo, which must stay in id order).
local function to_ready(id, pri)
  -- `0 - x`, not `-x`: no -0 score (see `neg`).
  redis.call('ZADD', K_READY, 0 - (tonumber(pri) or 0), member(id))
end

local function to_scheduled(id, due)
  redis.call('ZADD', K_SCHED, due, member(id))
end

-- Tells event `name` of item `id_s` (decimal), with `head` (text as on the
-- wire) and `data` (bytes, hex on the wire) when given: a failure's or
-- death's reason is cut to MAX_EVENT_TEXT bytes at a character boundary,
-- and a completion's `data` is its result (nil: none), left out past
-- MAX_EVENT_RESULT. Called with no name, only answers whether anyone
-- listens (false: nobody).
local function ev(name, id_s, head, data)
  if EV == nil then EV = redis.call('EXISTS', QUEUE_TAG .. 'events:on') == 1 and {} end
  if not (EV and name) then return EV end
  -- leaseq_core::events::{MAX_EVENT_TEXT, MAX_EVENT_RESULT} (a test keeps
  -- them equal).
  local MAX_EVENT_TEXT, MAX_EVENT_RESULT = 1024, 2048
  if name == 'completed' then
    if not data then
      head = 'none'
    elseif #data > MAX_EVENT_RESULT then
      head, data = 'elided', nil
    else
      head = 'r'
    end
  elseif data and #data > MAX_EVENT_TEXT and (name == 'failed' or name == 'dead') then
    local n = MAX_EVENT_TEXT
    while n > 0 and string.byte(data, n + 1) >= 128 and string.byte(data, n + 1) < 192 do n = n - 1 end
    data = string.sub(data, 1, n)
  end
  local w = name .. ' ' .. id_s
  if head then w = w .. ' ' .. head end
  if data and #data == 0 then
    w = w .. ' -'
  elseif data then
    local parts = { w, ' ' }
    for i = 1, #data, 64 do
      local j = math.min(i + 63, #data)
      parts[#parts + 1] = string.format(string.rep('%02x', j - i + 1), string.byte(data, i, j))
    end
    w = table.concat(parts)
  end
  EV[#EV + 1] = 'e'
  EV[#EV + 1] = w
  return EV
end

-- Adds the events told to the stream (about 4,096 entries kept, gone 10
-- minutes after the last), up to CALL_CHUNK values an entry. Never fails
-- the script: its change is made, and an event that cannot be written is
-- lost, as events may be.
local function ev_flush()
  if not EV or #EV == 0 then return end
  local key, list, n, i = QUEUE_TAG .. 'events', EV, #EV, 1
  while i <= n do
    local j = math.min(i + CALL_CHUNK - 1, n)
    redis.pcall('XADD', key, 'MAXLEN', '~', 4096, '*', unpack(list, i, j))
    i = j + 1
  end
  redis.pcall('PEXPIRE', key, 600000)
  EV = {}
end

-- When each Dead item died (ms): what `collect` ages dead letters by.
-- Written and deleted with `pcall`: a corrupt key fails no transition (a
-- letter without a time is aged from the first collect that meets it).
local K_DEAD_AT = qkey('dead:at')
-- Item `id` dies at `now` (nil: the server's clock now) for `reason`.
local function to_dead(id, reason, now)
  local id_s = fmt_int(id)
  ev('dead', id_s, nil, reason)
  redis.call('HSET', K_ERR, id_s, reason)
  redis.call('ZADD', K_DEAD, redis.call('INCR', K_DSEQ), member(id))
  redis.pcall('HSET', K_DEAD_AT, id_s, fmt_int(now or now_ms()))
end


-- Deletes the record of item `id_s` and every field kept per item,
-- releasing its dedup key (no unique-for hold starts). Its index entries
-- and its lease are the caller's.
local function drop_record(id_s)
  local dk = redis.call('HGET', K_DK, id_s)
  if dk and redis.call('HGET', K_DEDUP, dk) == id_s then redis.call('HDEL', K_DEDUP, dk) end
  for _, k in ipairs({ K_ITEMS, K_ATT, K_ERR, K_DK, K_UF, K_CANCEL, K_PROG }) do redis.call('HDEL', k, id_s) end
  redis.pcall('HDEL', K_DEAD_AT, id_s)
end

-- History (leaseq_core::History, src/history.rs): a queue's retention
-- policy and its kept finished items, apart from its items, so stats, peek,
-- item and the listing never see them.
--   retention       hash  ending ('completed', 'cancelled') -> 'age_ms,count'
--                         (an empty bound: none); no field: that ending is
--                         not kept; no key: nothing is (the default)
--   done            hash  id -> 'ending,finished,enqueued,attempts,elen,rlen,'
--                         then the last error (elen bytes), the result (rlen
--                         bytes; an empty elen or rlen: none), the payload
--   done:completed, done:cancelled  zset  member(id) -> finish time (ms)
--   ends            stream  one entry per script that kept an ending, for
--                         the finished signal (src/cancel_feed.rs)
local K_RET = qkey('retention')
-- Retention::dead, 'age_ms,count' (an empty bound: none); no key: dead
-- letters are kept for ever (the default). Apart from `retention`, whose
-- absence keeps the ack paths' check to one EXISTS.
local K_RET_DEAD = qkey('retention:dead')
local K_DONE = qkey('done')
local K_ENDS = qkey('ends')
local HIST_TYPES = { { K_RET, 'hash' }, { K_DONE, 'hash' }, { K_DONE .. ':completed', 'zset' },
                     { K_DONE .. ':cancelled', 'zset' }, { K_ENDS, 'stream' } }
-- The dead-letter bound's keys, which only retention.lua and collect.lua
-- read (apart from HIST_TYPES, which the ack paths build).
local DEAD_TYPES = { { K_RET_DEAD, 'string' }, { K_DEAD_AT, 'hash' } }

-- One ending's bounds stored as 'age_ms,count': { age =, count = } (nil:
-- no bound), or nil when the field is absent; an error on a malformed one.
local function keep_bounds(v)
  if not v then return nil end
  local a, c = string.match(v, '^(%d*),(%d*)$')
  if not a then error(redis.error_reply('LEASEQ_CORRUPT key ' .. K_RET .. ' holds ' .. shown(v))) end
  return { age = tonumber(a), count = tonumber(c) }
end

-- The queue's policy: { completed =, cancelled = } (bounds, or nil), or nil
-- when it keeps nothing. One HMGET when it keeps nothing; otherwise the
-- history's keys are checked (an error) before the caller's first write.
local function retention()
  local v = redis.call('HMGET', K_RET, 'completed', 'cancelled')
  if not v[1] and not v[2] then return nil end
  local bad = guard_types(HIST_TYPES)
  if bad then error(bad) end
  return { completed = keep_bounds(v[1]), cancelled = keep_bounds(v[2]) }
end

-- Removes the oldest kept items of `ending` beyond `count`, at most `batch`
-- (nil: all of them); returns how many.
local function trim_kept(ending, count, batch)
  local zk = K_DONE .. ':' .. ending
  local over = redis.call('ZCARD', zk) - count
  if batch then over = math.min(over, batch) end
  if over <= 0 then return 0 end
  local ms = redis.call('ZRANGE', zk, 0, over - 1)
  call_chunked('ZREM', zk, ms)
  local ids = {}
  for i, m in ipairs(ms) do ids[i] = fmt_int(tonumber(m)) end
  call_chunked('HDEL', K_DONE, ids)
  return #ms
end

-- Before items `ids` (decimal) leave the queue at `now`: keeps each whose
-- ending the policy `keep` keeps, with its payload, enqueue time, attempts
-- (plus `extra`: 1 for the lease that ends now), last error and, when it
-- ends Completed, `result` (nil: none). An item ends Cancelled when
-- `cancelled` is true or holds its id. Trims to the count, and adds an
-- entry to the `ends` stream when it kept any. Returns how many it kept.
local function keep_items(keep, ids, cancelled, extra, now, result)
  local recs = read_chunked('HMGET', K_ITEMS, ids)
  local atts = read_chunked('HMGET', K_ATT, ids)
  local errs = read_chunked('HMGET', K_ERR, ids)
  local now_s, kept, trims = fmt_int(now), 0, {}
  for i, id_s in ipairs(ids) do
    local ending = 'completed'
    if cancelled == true or (cancelled and cancelled[id_s]) then ending = 'cancelled' end
    local k, rec, enq, at = keep[ending], recs[i], nil, nil
    if rec then enq, at = string.match(rec, '^([^,]*),[^,]*,[^,]*,()') end
    if k and enq then
      local err, res = errs[i] or '', ''
      local elen, rlen = errs[i] and fmt_int(#err) or '', ''
      if ending == 'completed' and result then res, rlen = result, fmt_int(#result) end
      local att = math.min((int_field(atts[i] or '0', 0, ATT_MAX) or 0) + extra, ATT_MAX)
      redis.call('HSET', K_DONE, id_s, ending .. ',' .. now_s .. ',' .. enq .. ',' .. fmt_int(att) .. ',' .. elen
        .. ',' .. rlen .. ',' .. err .. res .. string.sub(rec, at))
      redis.call('ZADD', K_DONE .. ':' .. ending, now, member(tonumber(id_s)))
      if k.count then trims[ending] = k.count end
      kept = kept + 1
    end
  end
  for ending, count in pairs(trims) do trim_kept(ending, count, nil) end
  -- The finished signal's hint, kept short.
  if kept > 0 then redis.call('XADD', K_ENDS, 'MAXLEN', '~', 64, '*', 'n', kept) end
  return kept
end

-- A finishing call (release, give back, fail, snooze) on the lease of item
-- `id_s` with token `token`, which it fenced: when an operator asked to
-- cancel the item (leaseq_core::Control::cancel), the item ends Cancelled
-- here, gone with every field kept per item (its dedup key freed, no
-- unique-for hold), and this returns `answer`. Else nil, nothing written.
-- An error reply, before any write, when a key it touches has the wrong
-- type.
local function finish_cancelled(id_s, token, answer)
  if not cancel_requested(id_s, token) then return nil end
  local bad = guard(K_DEDUP, K_DK, K_UF)
  if bad then return bad end
  local keep, now = retention(), now_ms()
  if keep and keep.cancelled then keep_items(keep, { id_s }, true, 1, now) end
  end_lease(id_s, token)
  drop_record(id_s)
  ev('cancelled', id_s)
  ev_flush()
  return answer
end

-- Deletes item `id` and every trace of it, releasing its dedup key.
local function remove_item(id)
  local id_s, m = fmt_int(id), member(id)
  local token = redis.call('HGET', K_TOK, id_s)
  if token then end_lease(id_s, token) end
  drop_record(id_s)
  redis.call('ZREM', K_READY, m)
  redis.call('ZREM', K_SCHED, m)
  redis.call('ZREM', K_DEAD, m)
  redis.call('LREM', K_FIFO, 0, id_s)
end

-- Unique-for holds (`leaseq_core::NewItem::unique_for`): dedup keys kept
-- held after their item's ack. A sorted set (key -> held until, ms) and a
-- hash (key -> the acked id), both in the queue's slot.
local K_HELD, K_HELD_ID = QUEUE_TAG .. 'held', QUEUE_TAG .. 'heldid'
local HELD_TRIM = 64
-- Refuses (before any write) a hold key of the wrong type: an ack writes
-- them after its leases have left their groups, too late to fail cleanly.
local HOLD_TYPES = { { K_HELD, 'zset' }, { K_HELD_ID, 'hash' } }

-- The queue's limits hash (scripts/limits.lua), which also holds its pause
-- (leaseq_core::Control::pause): field `paused`, present while paused.
local K_LIMITS = K_EXTRA
-- 1 when the queue is paused, else 0 (K_EXTRA must be the limits hash);
-- refuses a limits key of the wrong type (an error).
local function paused_flag()
  local bad = guard_types({ { K_LIMITS, 'hash' } })
  if bad then error(bad) end
  return redis.call('HEXISTS', K_LIMITS, 'paused')
end

-- The listing of queues (src/listing.rs): `{p:q}:listed` holds the token
-- the queue was registered under while it is in the registry of queues;
-- `{p:q}:listgen` counts the prunes that took it out, so a registration
-- made before the latest prune is refused.
local K_LISTED, K_LISTGEN = QUEUE_TAG .. 'listed', QUEUE_TAG .. 'listgen'

-- Before an ack deletes item `id_s` with dedup key `dk`: when it was
-- enqueued with a hold, keeps `dk` held from now for that long, and drops
-- up to HELD_TRIM holds that ran out.
local function hold_after_ack(id_s, dk, now)
  local uf = tonumber(redis.call('HGET', K_UF, id_s))
  if not uf or uf <= 0 then return end
  redis.call('ZADD', K_HELD, fmt_int(now + uf), dk)
  redis.call('HSET', K_HELD_ID, dk, id_s)
  local old = redis.call('ZRANGEBYSCORE', K_HELD, '-inf', fmt_int(now), 'LIMIT', 0, HELD_TRIM)
  for _, d in ipairs(old) do
    redis.call('ZREM', K_HELD, d)
    redis.call('HDEL', K_HELD_ID, d)
  end
end

-- The acked id that holds `dk` at `now`, or nil.
local function held_by(dk, now)
  local until_ms = tonumber(redis.call('ZSCORE', K_HELD, dk))
  if until_ms and until_ms > now then
    return tonumber(redis.call('HGET', K_HELD_ID, dk))
  end
  return nil
end

-- Quarantine: moves item `id`, taken out of the index of state `from`, to
-- Dead with the reason 'quarantined: <problem>', and records the repair.
-- A quarantined item is never leased; `redrive` brings it back only once
-- its record and attempts are usable.
local function quarantine(id, from, problem, repairs)
  local reason = 'quarantined: ' .. problem
  to_dead(id, reason)
  add_repair(repairs, from, id, reason .. '; moved to dead')
end

-- After a lease of item `id` (record `r`, `att` attempts before it) ended
-- unacked: Dead (`reason`) when that was its last attempt, else Ready, or
-- Scheduled at `due` when given. Returns the state.
local function after_attempt(id, r, att, reason, due)
  local made = att + 1
  set_attempts(fmt_int(id), made)
  if made >= tonumber(r[2]) then
    to_dead(id, reason)
    return 'dead'
  end
  if due then
    to_scheduled(id, due)
    return 'scheduled'
  end
  to_ready(id, r[3])
  return 'ready'
end

-- The state of item `id` (with `id_s`, `m` its decimal and member
-- spellings) and its due time (Scheduled: when due; Leased: the lease's
-- expiry, and its token), or nil when the queue holds no record of it. An
-- item no other index holds is Ready.
local function state_of(id, id_s, m)
  if redis.call('HEXISTS', K_ITEMS, id_s) == 0 then return nil end
  local token = redis.call('HGET', K_TOK, id_s)
  if token then return 'leased', lease_expiry(id_s, token), token end
  if redis.call('ZSCORE', K_DEAD, m) then return 'dead' end
  local due = redis.call('ZSCORE', K_SCHED, m)
  if due then return 'scheduled', tonumber(due) end
  return 'ready'
end

-- Moves due Scheduled items to Ready, at most one bounded batch per call;
-- or, given `ms`, those Scheduled entries (members, at most a bounded
-- batch), due or not (run now). An entry without a record is dropped, one
-- of a Leased item (a stray) is dropped, and an unusable item is
-- quarantined; each is reported. Returns how many moved. (One function,
-- not two: each costs the claim a definition per call.)
local function promote_due(now, repairs, ms)
  ms = ms or redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', now, 'LIMIT', 0, PROMOTE_BATCH)
  if #ms == 0 then return 0 end
  local bad = guard(K_ITEMS, K_TOK, K_ATT, K_READY, K_DEAD, K_DSEQ, K_ERR)
  if bad then error(bad) end
  call_chunked('ZREM', K_SCHED, ms)
  local ids, ids_s = {}, {}
  for _, m in ipairs(ms) do
    local id = member_id(m)
    if id then
      ids[#ids + 1], ids_s[#ids_s + 1] = id, fmt_int(id)
    else
      add_repair(repairs, 'scheduled', 0, 'malformed index entry ' .. string.sub(m, 1, 64))
    end
  end
  if #ids == 0 then return 0 end
  local recs = read_chunked('HMGET', K_ITEMS, ids_s)
  local toks = read_chunked('HMGET', K_TOK, ids_s)
  local atts = read_chunked('HMGET', K_ATT, ids_s)
  local moved, ready = 0, {}
  for i, id in ipairs(ids) do
    if not recs[i] then
      add_repair(repairs, 'scheduled', id, 'item is missing')
    elseif toks[i] then
      add_repair(repairs, 'scheduled', id, 'duplicate entry: the item is leased')
    else
      local problem, r = unusable(recs[i], atts[i])
      if problem then
        quarantine(id, 'scheduled', problem, repairs)
      else
        ready[#ready + 1] = 0 - tonumber(r[3])
        ready[#ready + 1] = member(id)
        moved = moved + 1
      end
    end
  end
  zadd_batch(K_READY, ready)
  notify(moved)
  return moved
end

-- The item behind a lease, if `token` is its current token: returns its
-- decimal id and record, and the attempts made before the lease; else nil.
local function fenced(id, token)
  if not id then return nil end
  local id_s = fmt_int(id)
  if redis.call('HGET', K_TOK, id_s) ~= token then return nil end
  return id_s, redis.call('HGET', K_ITEMS, id_s), redis.call('HGET', K_ATT, id_s)
end

-- One item as inspection shows it: { id, state, payload, priority, attempts,
-- max attempts, dedup key, due, last error, enqueued at, progress, cancel
-- requested } (the last two only for a Leased item: the progress its
-- lease recorded, or false; 1 when an operator asked to cancel it, else
-- 0), every number
-- within the field limits (a field outside them shows as the nearest safe
-- value: priority 0, attempts 0, max attempts 1, a missing payload as '',
-- a missing enqueue time as the due time or `now`). Also returns why the
-- item cannot be used (nil when it can; never checked for a Dead item) and
-- its state as stored (Scheduled even when due). Nil when there is no item.
local function item_record(id, now)
  local id_s, m = fmt_int(id), member(id)
  local home, due, token = state_of(id, id_s, m)
  if not home then return nil end
  local progress, cancel = false, 0
  if token then
    local p = redis.call('HGET', K_PROG, id_s)
    if p and string.sub(p, 1, 32) == token then progress = string.sub(p, 33) end
    if cancel_requested(id_s, token) then cancel = 1 end
  end
  local rec = redis.call('HGET', K_ITEMS, id_s)
  local a = redis.call('HGET', K_ATT, id_s)
  local problem = nil
  local r, att = nil, nil
  if home ~= 'dead' then
    problem, r, att = unusable(rec, a)
  end
  local enq, maxa, pri, payload = nil, nil, nil, ''
  local pre_e, pre_m, pre_p, rest = string.match(rec, '^([^,]*),([^,]*),([^,]*),()')
  if pre_e then
    enq, maxa, pri, payload = int_field(pre_e, 0, ID_MAX), int_field(pre_m, 1, MAX_ATT_MAX),
      int_field(pre_p, PRI_MIN, PRI_MAX), string.sub(rec, rest)
  else
    pre_e, pre_m, pre_p = string.match(rec, '^([^,]*),([^,]*),([^,]*)$')
    enq, maxa, pri = int_field(pre_e, 0, ID_MAX), int_field(pre_m, 1, MAX_ATT_MAX), int_field(pre_p, PRI_MIN, PRI_MAX)
  end
  att = int_field(a or '0', 0, ATT_MAX) or 0
  if home == 'leased' then att = math.min(att + 1, ATT_MAX) end
  enq = enq or (home == 'scheduled' and due) or now
  local st = as_read(home, due, now)
  if st ~= 'scheduled' and st ~= 'leased' then due = false end
  return { id, st, payload, pri or 0, att, maxa or 1, redis.call('HGET', K_DK, id_s) or false, due or false,
           redis.call('HGET', K_ERR, id_s) or false, enq, progress, cancel }, problem, home
end

-- What inspection does with an item `item_record` found unusable: a Ready
-- or Scheduled one is quarantined (moved to Dead, repair recorded) and its
-- record rewritten to match; a Leased one is left to its lease holder (an
-- ack still removes it; a reap quarantines it once the lease expires) and
-- noted. Returns true when the item moved. The keys must be guarded.
local function inspect_poison(rec, problem, home, repairs)
  local id = rec[1]
  if home == 'ready' or home == 'scheduled' then
    local m = member(id)
    redis.call('ZREM', K_READY, m)
    redis.call('ZREM', K_SCHED, m)
    redis.call('LREM', K_FIFO, 0, fmt_int(id))
    quarantine(id, home, problem, repairs)
    rec[2], rec[8], rec[9] = 'dead', false, 'quarantined: ' .. problem
    return true
  end
  add_repair(repairs, home, id, 'unusable fields (' .. problem .. '); left to its lease holder')
  return false
end

-- Acks the leased items `ids` (decimal, each once) whose current tokens are
-- `toks`: their leases leave their groups, and the items go with every
-- trace (a dedup key is released, or held for its unique-for time unless
-- an operator asked to cancel the item: it ends Cancelled). Each is kept
-- as its ending when the queue's policy says so (a Completed one with
-- `result`, nil: none). Returns how many completed (the rest ended
-- Cancelled), for the caller to count (`count_completed`).
local function ack_items(ids, toks, now, result)
  local keep = retention()
  local cancelled = end_control(ids, toks)
  local done = #ids
  if cancelled then
    for _ in pairs(cancelled) do done = done - 1 end
  end
  if ev() then
    for _, id_s in ipairs(ids) do
      if cancelled and cancelled[id_s] then
        ev('cancelled', id_s)
      else
        ev('completed', id_s, nil, result)
      end
    end
  end
  if keep then keep_items(keep, ids, cancelled, 1, now, result) end
  local moved = redis.call('EXISTS', K_MOVED) == 1 and read_chunked('HMGET', K_MOVED, ids)
  leave_groups(group_counts(toks, moved))
  if moved then call_chunked('HDEL', K_MOVED, ids) end
  if redis.call('EXISTS', K_DK) == 1 then
    local dks = read_chunked('HMGET', K_DK, ids)
    for i = 1, #ids do
      local dk = dks[i]
      if dk then
        if not (cancelled and cancelled[ids[i]]) then hold_after_ack(ids[i], dk, now) end
        if redis.call('HGET', K_DEDUP, dk) == ids[i] then redis.call('HDEL', K_DEDUP, dk) end
      end
    end
    call_chunked('HDEL', K_DK, ids)
    call_chunked('HDEL', K_UF, ids)
  end
  for _, k in ipairs({ K_ATT, K_ERR }) do
    if redis.call('EXISTS', k) == 1 then call_chunked('HDEL', k, ids) end
  end
  call_chunked('HDEL', K_TOK, ids)
  call_chunked('HDEL', K_ITEMS, ids)
  return done
end

-- The first `k` Ready entries in claim order (priority, then id), without
-- taking them: their decimal ids in that order (a malformed ranked member
-- is left out, and reported when `repairs` is given), the ranked members
-- among them (malformed ones included) and how many come from the fifo.
-- The fifo holds priority 0 in id order; ranked members with a score
-- below 0 (priority above 0) come first, those at 0 merge with the fifo
-- by id, those above 0 come last.
local function ready_head(k, repairs)
  local out, zrem = {}, {}
  local zs = redis.call('ZRANGE', K_READY, '-inf', '0', 'BYSCORE', 'LIMIT', 0, k, 'WITHSCORES')
  local ls = redis.call('LRANGE', K_FIFO, 0, k - 1)
  local zi, li = 1, 1
  local function take_z(m)
    zrem[#zrem + 1] = m
    local id = member_id(m)
    if id then
      out[#out + 1] = fmt_int(id)
    elseif repairs then
      add_repair(repairs, 'ready', 0, 'malformed index entry ' .. string.sub(m, 1, 64))
    end
  end
  while #zrem + li - 1 < k do
    local zm, lm = zs[zi], ls[li]
    if not zm and not lm then break end
    if zm and (not lm or tonumber(zs[zi + 1]) < 0 or (tonumber(zm) or 0) < (tonumber(lm) or 0)) then
      take_z(zm)
      zi = zi + 2
    else
      out[#out + 1] = lm
      li = li + 1
    end
  end
  local taken = #zrem + li - 1
  if taken < k then
    for _, m in ipairs(redis.call('ZRANGE', K_READY, '(0', '+inf', 'BYSCORE', 'LIMIT', 0, k - taken)) do
      take_z(m)
    end
  end
  return out, zrem, li - 1
end

-- The ids (decimal) whose lease is in group `g`, in claim order. A
-- malformed entry of the group's list is left out, and reported when
-- `repairs` is given.
local function group_ids(g, repairs)
  local ids = {}
  for s in string.gmatch(redis.call('HGET', K_GIDS, g) or '', '[^,]+') do
    if decimal_id(s) then
      ids[#ids + 1] = s
    elseif repairs then
      add_repair(repairs, 'leased', 0, 'malformed entry ' .. string.sub(s, 1, 64) .. ' in lease group ' .. string.sub(g, 1, 64))
    end
  end
  if #ids == 0 then return ids end
  local toks = read_chunked('HMGET', K_TOK, ids)
  local moved = read_chunked('HMGET', K_MOVED, ids)
  local out = {}
  for i, id_s in ipairs(ids) do
    local t, x = toks[i], moved[i]
    if t and ((x and x == g) or (not x and string.sub(t, 1, 24) == g)) then out[#out + 1] = id_s end
  end
  return out
end

-- Redrives Dead entry `m`: 'moved' (to Ready, attempts reset), 'kept' and
-- the problem (its record is still unusable: it stays), or 'dropped' (an
-- entry without a record, of a Leased item, or malformed: removed and
-- reported).
local function redrive_entry(m, repairs)
  local id = member_id(m)
  if not id then
    redis.call('ZREM', K_DEAD, m)
    add_repair(repairs, 'dead', 0, 'malformed index entry ' .. string.sub(m, 1, 64))
    return 'dropped'
  end
  local id_s = fmt_int(id)
  local rec = redis.call('HGET', K_ITEMS, id_s)
  local why = nil
  if not rec then
    why = 'item is missing'
  elseif redis.call('HEXISTS', K_TOK, id_s) == 1 then
    why = 'duplicate entry: the item is leased'
  end
  if why then
    redis.call('ZREM', K_DEAD, m)
    add_repair(repairs, 'dead', id, why)
    return 'dropped'
  end
  local problem, r = unusable(rec, false)
  if problem then return 'kept', problem end
  redis.call('ZREM', K_DEAD, m)
  redis.call('ZREM', K_SCHED, m)
  redis.call('HDEL', K_ATT, id_s)
  redis.pcall('HDEL', K_DEAD_AT, id_s)
  to_ready(id, r[3])
  return 'moved'
end

-- Counts every completion (ack, ack_many, complete) in the script that
-- makes it; kept by purge, deleted by delete_queue.
local K_COMPLETED = qkey('completed')

-- Counts `n` completions. A counter that is not a number (corrupt) starts
-- again from `n`: the step that acks must not fail halfway over it.
local function count_completed(n)
  if n <= 0 then return end
  local r = redis.pcall('INCRBY', K_COMPLETED, n)
  if type(r) == 'table' then redis.call('SET', K_COMPLETED, n) end
end
