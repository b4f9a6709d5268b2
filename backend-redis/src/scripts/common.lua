-- leaseq: shared prelude of every script (prepended at build time).
-- KEYS: 1 ready, 2 scheduled, 3 leased, 4 dead (sorted sets), 5 id counter,
-- 6 death counter, 7 dedup (hash key -> id), 8 notify (list), 9 id mark (a
-- second copy of the id counter, see scripts/enqueue_batch.lua).
-- ARGV[1]: the prefix of item hash keys; script arguments start at ARGV[2].
local K_READY, K_SCHED, K_LEASED, K_DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_SEQ, K_DSEQ, K_DEDUP, K_NOTIFY = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_MARK = KEYS[9]
-- After `delete_queue`, for as long as its `enqueue_once` records live: the
-- queue's last id then (scripts/queue_delete.lua, enqueue_once.lua).
local K_DELETED = K_SEQ .. ':deleted'
local ITEM_PREFIX = ARGV[1]
local INDEX = { ready = K_READY, scheduled = K_SCHED, leased = K_LEASED, dead = K_DEAD }
local NOTIFY_CAP = 32
local PROMOTE_BATCH = 500

-- Redis Cluster: while the slot is being migrated, some of its keys may sit on
-- the other node already, and a command on one of them would fail the script
-- halfway through. So the first command probes the slot: a two-key EXISTS of a
-- declared key and an item key that never exists (id 0). In a stable slot (and
-- on a single server) it just answers; while the slot migrates (or imports)
-- the server refuses it, because a key is not local, and the script stops here
-- before any write, with TRYAGAIN: the client sends it again later.
do
  local probe = redis.pcall('EXISTS', K_READY, ITEM_PREFIX .. '0')
  if type(probe) == 'table' and probe.err then
    return redis.error_reply('TRYAGAIN leaseq: the slot of ' .. K_READY .. ' is migrating: ' .. probe.err)
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
-- Index members are zero-padded ids, so equal scores sort by id (FIFO).
local function member(id) return string.format('%020d', id) end
local function item_key(id) return ITEM_PREFIX .. fmt_int(id) end
local function key_type(k) return redis.call('TYPE', k)['ok'] end

-- Field limits: what an item hash must hold to be used. src/decode.rs checks
-- the same limits on every reply (a unit test keeps the two equal):
-- - attempts: 0 to ATT_MAX (i32::MAX); an item about to be claimed at most
--   ATT_MAX - 1, so the claim's + 1 stays within the limit;
-- - max attempts: 1 to MAX_ATT_MAX (i32::MAX, leaseq_core::limits::MAX_ATTEMPTS);
-- - priority: PRI_MIN to PRI_MAX (an i32);
-- - the payload field present.
-- Each number is a decimal integer as the scripts write it (an optional '-'
-- and digits), nothing else.
local ATT_MAX = 2147483647
local MAX_ATT_MAX = 2147483647
local PRI_MIN, PRI_MAX = -2147483648, 2147483647
-- Ids are exact up to 2^53 - 1 (Lua numbers are doubles).
local ID_MAX = 9007199254740991

-- The id index member `m` names, and its item's key; nil when `m` is not
-- `member(id)` of an id from 1 to ID_MAX. One `tonumber` and a format
-- back, compared with `m`: only the canonical 20 digits round-trip (a hex,
-- signed, spaced, fractional or out-of-range spelling does not), and it
-- costs half what two pattern scans do, paid per item in a batch.
local function member_id(m)
  local id = tonumber(m)
  if not id or id < 1 or id > ID_MAX or member(id) ~= m then return nil end
  return id, item_key(id)
end

-- `s` (a field or key value: a string, or false when missing) as an integer
-- in [lo, hi], or nil. `tonumber` alone would also take '1e3', '0x10', ' 5',
-- '1.5', 'inf' and 'nan'.
local function int_field(s, lo, hi)
  if type(s) ~= 'string' or #s > 20 or not string.find(s, '^%-?%d+$') then return nil end
  local n = tonumber(s)
  if n == nil or n < lo or n > hi then return nil end
  return n
end

-- The state a read shows for an item whose record says `st` and whose due
-- time is `due` (a number or nil): a Scheduled item past its due time is
-- Ready, moved or not.
local function as_read(st, due, now)
  if st == 'scheduled' and due and due <= now then return 'ready' end
  return st
end

-- A field's value for a problem report: quoted and cut short, or 'missing'.
local function shown(s)
  if type(s) ~= 'string' then return 'missing' end
  if #s > 40 then s = string.sub(s, 1, 40) .. '...' end
  return "'" .. s .. "'"
end

-- Why an item with these fields cannot be used, or nil when it can.
-- `claimable`: it may be claimed next, so attempts must leave room for one
-- more. `has_p`: whether the payload field is there (nil: not checked).
-- Values found valid are remembered for the rest of the call: a batch's
-- items mostly share their attempts, max attempts and priority, and a
-- table lookup costs a fraction of the pattern scan and conversion.
local VALID_ATT, VALID_ATT_CLAIMABLE, VALID_MAX, VALID_PRI = {}, {}, {}, {}
local function unusable(att, maxa, pri, claimable, has_p)
  local att_hi, valid_att = ATT_MAX, VALID_ATT
  if claimable then att_hi, valid_att = ATT_MAX - 1, VALID_ATT_CLAIMABLE end
  if not valid_att[att] then
    if not int_field(att, 0, att_hi) then
      return 'attempts field holds ' .. shown(att) .. ' (valid: 0 to ' .. fmt_int(att_hi) .. ')'
    end
    valid_att[att] = true
  end
  if not VALID_MAX[maxa] then
    if not int_field(maxa, 1, MAX_ATT_MAX) then
      return 'max attempts field holds ' .. shown(maxa) .. ' (valid: 1 to ' .. fmt_int(MAX_ATT_MAX) .. ')'
    end
    VALID_MAX[maxa] = true
  end
  if not VALID_PRI[pri] then
    if not int_field(pri, PRI_MIN, PRI_MAX) then
      return 'priority field holds ' .. shown(pri) .. ' (valid: ' .. fmt_int(PRI_MIN) .. ' to ' .. fmt_int(PRI_MAX) .. ')'
    end
    VALID_PRI[pri] = true
  end
  if has_p == false then return 'payload field is missing' end
  return nil
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

-- ZADD of a batch's score/member pairs, the last pair first. A batch's
-- members ascend, and a small sorted set (a listpack, up to 128 members by
-- default) finds each insert's place by a scan from its head: highest
-- first, each scan stops at the batch's members added before it instead of
-- passing all of them (100 ids: 140 us in order, 56 us reversed).
local function zadd_batch(key, pairs)
  local rev, n = {}, #pairs
  for i = n - 1, 1, -2 do
    rev[n - i] = pairs[i]
    rev[n - i + 1] = pairs[i + 1]
  end
  return call_chunked('ZADD', key, rev)
end

-- The type each structural key must have.
local WANT = { [K_READY] = 'zset', [K_SCHED] = 'zset', [K_LEASED] = 'zset', [K_DEAD] = 'zset',
               [K_SEQ] = 'string', [K_DSEQ] = 'string', [K_DEDUP] = 'hash', [K_MARK] = 'string' }

-- Refuses to run (before any write) when one of the structural keys given
-- (the ones the script touches) has the wrong type.
local function guard(...)
  for _, k in ipairs({ ... }) do
    local got = key_type(k)
    if got ~= 'none' and got ~= WANT[k] then
      return redis.error_reply('LEASEQ_CORRUPT key ' .. k .. ' holds a ' .. got .. ', expected a ' .. WANT[k])
    end
  end
  return nil
end

-- `guard` of the four indexes and the death counter (what `check_entry`
-- and `quarantine` may touch) and `...`.
local function guard_indexes(...)
  return guard(K_READY, K_SCHED, K_LEASED, K_DEAD, K_DSEQ, ...)
end

-- A coalesced wake-up hint for idle workers; never fails the script.
local function notify(n)
  if n <= 0 then return end
  local t = key_type(K_NOTIFY)
  if t ~= 'none' and t ~= 'list' then redis.call('DEL', K_NOTIFY) end
  if n > NOTIFY_CAP then n = NOTIFY_CAP end
  while n >= 8 do
    redis.call('LPUSH', K_NOTIFY, '1', '1', '1', '1', '1', '1', '1', '1')
    n = n - 8
  end
  for _ = 1, n do redis.call('LPUSH', K_NOTIFY, '1') end
  redis.call('LTRIM', K_NOTIFY, 0, NOTIFY_CAP - 1)
end

local function add_repair(repairs, index, id, problem)
  repairs[#repairs + 1] = { index, id, problem }
end

-- Moves index entry `m` from the index of state `from` (the one the caller
-- found the item in; nil for a new item) to `to`'s. Other indexes are not
-- touched: an entry left there by corruption names an item whose state says
-- otherwise, and `check_entry` removes it when it meets it.
local function set_home(m, from, to, score)
  if from and from ~= to then redis.call('ZREM', INDEX[from], m) end
  redis.call('ZADD', INDEX[to], score, m)
end

local function to_ready(m, k, from, pri)
  if from then redis.call('HDEL', k, 'tok', 'due') end
  redis.call('HSET', k, 'st', 'ready')
  -- `0 - x`, not `-x`: no -0 score (see `neg`).
  set_home(m, from, 'ready', 0 - (tonumber(pri) or 0))
end

local function to_scheduled(m, k, from, due)
  if from then redis.call('HDEL', k, 'tok') end
  redis.call('HSET', k, 'st', 'scheduled', 'due', due)
  set_home(m, from, 'scheduled', due)
end

local function to_dead(m, k, from, reason)
  redis.call('HDEL', k, 'tok', 'due')
  redis.call('HSET', k, 'st', 'dead', 'err', reason)
  set_home(m, from, 'dead', redis.call('INCR', K_DSEQ))
end

-- Deletes the item and every trace of it, releasing its dedup key `dk`.
-- `from`: the index it is in (nil: all of them).
local function remove_item(id, m, k, dk, from)
  if dk and redis.call('HGET', K_DEDUP, dk) == fmt_int(id) then
    redis.call('HDEL', K_DEDUP, dk)
  end
  redis.call('DEL', k)
  if from then
    redis.call('ZREM', INDEX[from], m)
  else
    for _, key in pairs(INDEX) do redis.call('ZREM', key, m) end
  end
end

-- Unique-for holds (`leaseq_core::NewItem::unique_for`): dedup keys kept
-- held after their item's ack. A sorted set (key -> held until, ms) and a
-- hash (key -> the acked id), both in the queue's slot (named after the
-- item prefix, `{p:q}:item:` -> `{p:q}:held`, `{p:q}:heldid`).
local QUEUE_TAG = string.sub(ITEM_PREFIX, 1, -6)
local K_HELD, K_HELD_ID = QUEUE_TAG .. 'held', QUEUE_TAG .. 'heldid'
local HELD_TRIM = 64

-- The listing of queues (src/listing.rs): `{p:q}:listed` holds the token
-- the queue was registered under while it is in the registry of queues;
-- `{p:q}:listgen` counts the prunes that took it out, so a registration
-- made before the latest prune is refused.
local K_LISTED, K_LISTGEN = QUEUE_TAG .. 'listed', QUEUE_TAG .. 'listgen'

-- Before an ack deletes item `k` (id `id`, dedup key `dk`): when it was
-- enqueued with a hold, keeps `dk` held from now for that long, and drops up
-- to HELD_TRIM holds that ran out.
local function hold_after_ack(id, k, dk)
  if not dk then return end
  local uf = tonumber(redis.call('HGET', k, 'uf'))
  if not uf or uf <= 0 then return end
  local now = now_ms()
  redis.call('ZADD', K_HELD, fmt_int(now + uf), dk)
  redis.call('HSET', K_HELD_ID, dk, fmt_int(id))
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

-- Quarantine: moves an item whose fields cannot be used (`problem`, from
-- `unusable`) from the index of state `from` to Dead with the reason
-- 'quarantined: <problem>', and records the repair. A quarantined item is
-- never leased; `redrive` brings it back only once its fields are usable.
local function quarantine(m, id, k, from, problem, repairs)
  local reason = 'quarantined: ' .. problem
  to_dead(m, k, from, reason)
  add_repair(repairs, from, id, reason .. '; moved to dead')
end

-- Checks the item an index entry names. Returns (id, item key, fields) when
-- the entry is sound, where fields = HMGET st, att, max, pri (and p, enq
-- when `payload`); otherwise repairs it, records the repair, and returns nil.
local function check_entry(index, m, repairs, payload)
  local key = INDEX[index]
  local id, k = member_id(m)
  if not id then
    redis.call('ZREM', key, m)
    add_repair(repairs, index, 0, 'malformed index entry ' .. string.sub(m, 1, 64))
    return nil
  end
  local f
  if payload then
    f = redis.pcall('HMGET', k, 'st', 'att', 'max', 'pri', 'p', 'enq')
  else
    f = redis.pcall('HMGET', k, 'st', 'att', 'max', 'pri')
  end
  if f.err then
    -- Not a hash (WRONGTYPE).
    local t = key_type(k)
    redis.call('DEL', k)
    for _, ik in pairs(INDEX) do redis.call('ZREM', ik, m) end
    add_repair(repairs, index, id, 'item key held a ' .. t .. ' instead of a hash (WRONGTYPE); removed')
    return nil
  end
  local st = f[1]
  if st == index then return id, k, f end
  if not st and redis.call('EXISTS', k) == 0 then
    redis.call('ZREM', key, m)
    add_repair(repairs, index, id, 'item is missing')
    return nil
  end
  if st and INDEX[st] and redis.call('ZSCORE', INDEX[st], m) then
    redis.call('ZREM', key, m)
    add_repair(repairs, index, id, 'duplicate entry: the item is ' .. st)
    return nil
  end
  -- This entry is the item's only home: the item follows the index.
  redis.call('HSET', k, 'st', index)
  add_repair(repairs, index, id, 'item state said ' .. tostring(st) .. '; adopted by this index')
  f[1] = index
  return id, k, f
end

-- Moves due Scheduled items to Ready, at most one bounded batch per call.
local function promote_due(now, repairs)
  local ms = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', now, 'LIMIT', 0, PROMOTE_BATCH)
  local moved = 0
  for _, m in ipairs(ms) do
    local id, k, f = check_entry('scheduled', m, repairs)
    if id then
      local problem = unusable(f[2], f[3], f[4], true)
      if problem then
        quarantine(m, id, k, 'scheduled', problem, repairs)
      else
        to_ready(m, k, 'scheduled', f[4])
        moved = moved + 1
      end
    end
  end
  notify(moved)
  return moved
end

-- The item behind a lease, if `token` is its current token: returns its key
-- and fields { st, tok, att, max, pri, dk }; else nil.
local function fenced(id, token)
  local k = item_key(id)
  local f = redis.pcall('HMGET', k, 'st', 'tok', 'att', 'max', 'pri', 'dk')
  if f.err or f[1] ~= 'leased' or f[2] ~= token then return nil end
  return k, f
end

-- The state whose index holds member `m`, or nil.
local function home_of(m)
  for _, st in ipairs({ 'ready', 'scheduled', 'leased', 'dead' }) do
    if redis.call('ZSCORE', INDEX[st], m) then return st end
  end
  return nil
end

-- The enqueue time of an item whose `enq` field is missing or not an
-- integer (written before the field existed, or damaged): its due time
-- when it is Scheduled (when it became claimable), else `now`.
local function enq_or(enq, st, due, now)
  local t = int_field(enq, 0, ID_MAX)
  if t then return t end
  if st == 'scheduled' and due then return due end
  return now
end

-- One item as inspection shows it: { id, state, payload, priority, attempts,
-- max attempts, dedup key, due, last error, enqueued at }, every number
-- within the field limits (a field outside them shows as the nearest safe
-- value: priority 0, attempts 0, max attempts 1; a missing payload as ''; a
-- missing enqueue time as `enq_or` says). Also returns why the item cannot
-- be used (nil when it can; never checked for a Dead item) and its home: the
-- state its record names, else the index holding it.
local function item_record(id, k, now)
  local f = redis.call('HMGET', k, 'st', 'p', 'pri', 'att', 'max', 'dk', 'due', 'err', 'enq')
  local home = f[1]
  if not INDEX[home] then home = home_of(member(id)) or 'ready' end
  local problem = nil
  if home ~= 'dead' then
    problem = unusable(f[4], f[5], f[3], home == 'ready' or home == 'scheduled', type(f[2]) == 'string')
  end
  local st, due = home, int_field(f[7], 0, ID_MAX)
  local enq = enq_or(f[9], st, due, now)
  st = as_read(st, due, now)
  if st ~= 'scheduled' and st ~= 'leased' then due = false end
  return { id, st, f[2] or '', int_field(f[3], PRI_MIN, PRI_MAX) or 0, int_field(f[4], 0, ATT_MAX) or 0,
           int_field(f[5], 1, MAX_ATT_MAX) or 1, f[6] or false, due or false, f[8] or false, enq }, problem, home
end

-- What inspection does with an item `item_record` found unusable: a Ready
-- or Scheduled one is quarantined (moved to Dead, repair recorded) and its
-- record rewritten to match; a Leased one is left to its lease holder (an
-- ack still removes it; a reap quarantines it once the lease expires) and
-- noted. Returns true when the item moved. The indexes must be guarded.
local function inspect_poison(rec, problem, home, repairs)
  local id = rec[1]
  if home == 'ready' or home == 'scheduled' then
    quarantine(member(id), id, item_key(id), home, problem, repairs)
    rec[2], rec[8], rec[9] = 'dead', false, 'quarantined: ' .. problem
    return true
  end
  add_repair(repairs, home, id, 'unusable fields (' .. problem .. '); left to its lease holder')
  return false
end
