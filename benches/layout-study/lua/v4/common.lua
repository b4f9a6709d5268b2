-- Layout v4 of the layout study (one queue, all keys share one hash tag):
--  1 run     string  replication id when the counter was last written
--  2 (unused)
--  3 items   hash    id -> "enq,max,pri,payload" (written once, at enqueue);
--                    field '#seq' = the id counter (so the counter and the
--                    records it protects are one key: neither can be lost or
--                    restored without the other)
--  4 r0      list    Ready ids of priority 0, never delayed, in id order
--  5 rz      zset    other Ready ids: score -pri, member 20-digit id
--  6 sched   zset    delayed ids: score due, member 20-digit id
--  7 leased  zset    lease GROUPS: member group id, score expiry (ms)
--  8 tok     hash    id -> lease group (present <=> leased). A claim draws one
--                    random 96-bit group; the client's 128-bit token for slot k
--                    is <group: 24 hex><k: 8 hex>. The fence is (id, group):
--                    a claim never leases an id twice, and a new claim of the
--                    id has a new group. Weakness: within one claim the slot
--                    is not checked, so a token of that claim acks any of its
--                    ids (v2 stores the full token and has no such gap).
--  9 att     hash    id -> attempts before the current lease (absent = 0);
--                    written only when a lease ends unacked (reap, release, fail)
-- 10 ext     hash    id -> group of an extended lease (it left its claim's group)
-- 11 gi      hash    group -> "id,id,..." (the ids leased in it)
-- 12 gn      hash    group -> leases of the group still live
-- 13 gseq    string  counter for the groups extend makes
-- 14 notify  list    wake-up markers
-- 15 dk      hash    id -> dedup key (only items that have one)
-- 16 dead    zset    dead ids
-- 17 listed  string  listing marker
-- Hashes that hold one field per item carry a field '~' with a value longer
-- than hash-max-listpack-value, so they are always hash tables: a batch's
-- HSET/HMGET into a listpack of up to 512 fields is quadratic.
local K_RUN, K_MARK, K_I, K_R0, K_RZ, K_S, K_L = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local K_T, K_A, K_X, K_GI, K_GN, K_GSEQ = KEYS[8], KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local K_NOTIFY, K_DK, K_DEAD, K_LISTED = KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local WIDE = 'leaseq layout 2: this hash is kept a hash table (a value over 64 bytes) ............'

do
  local probe = redis.pcall('EXISTS', K_RUN, K_I)
  if type(probe) == 'table' and probe.err then
    return redis.error_reply('TRYAGAIN slot migrating')
  end
end

local WANT = { [K_RUN] = 'string', [K_MARK] = 'string', [K_I] = 'hash', [K_R0] = 'list', [K_RZ] = 'zset',
  [K_S] = 'zset', [K_L] = 'zset', [K_T] = 'hash', [K_A] = 'hash', [K_X] = 'hash', [K_GI] = 'hash',
  [K_GN] = 'hash', [K_GSEQ] = 'string', [K_DK] = 'hash', [K_DEAD] = 'zset' }
local NO_GUARD = true  -- fast path: types checked by the first command on each key (see enqueue)
local function guard(...)
  if NO_GUARD then return nil end
  for _, k in ipairs({ ... }) do
    local got = redis.call('TYPE', k)['ok']
    if got ~= 'none' and got ~= WANT[k] then
      return redis.error_reply('LEASEQ_CORRUPT key ' .. k .. ' holds a ' .. got .. ', expected a ' .. WANT[k])
    end
  end
  return nil
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function fmt_int(n) return string.format('%d', n) end
local function member(id) return string.format('%020d', id) end

local function leave_groups(cnt)
  for g, c in pairs(cnt) do
    if redis.call('HINCRBY', K_GN, g, -c) <= 0 then
      redis.call('ZREM', K_L, g)
      redis.call('HDEL', K_GI, g)
      redis.call('HDEL', K_GN, g)
    end
  end
end
