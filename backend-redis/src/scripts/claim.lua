-- claim: ARGV[2] = lease ttl ms, ARGV[3] = max, ARGV[4] = one fresh token
-- per slot, 32 hex digits each, end to end, all of one family (one
-- `ClaimSpec`'s); K_EXTRA = the queue's limits hash (scripts/limits.lua).
-- Returns { ids, records, attempts, repairs, more, retry after ms or nil,
-- expires at }, or with an eighth value 1 when the queue is paused
-- (leaseq_core::Control::pause; nothing leased, nothing written); ids one text, the decimal ids joined by ',' (one reply
-- value instead of one per lease): lease k is item ids[k] with records[k] (its
-- `enq,max,pri,payload` as stored) on attempt attempts[k], or on its first
-- attempt when attempts is false (no item of the queue has attempts
-- recorded). Lease k holds the k-th token of ARGV and every lease of the
-- call expires at the same time, so neither is sent back. more = 1 when
-- the call stopped at its repair budget with slots still open.
-- Claim order is priority, then id: `ready:fifo` (priority 0, in id order)
-- merged with `ready:ranked` (see `ready_head`).
-- A Ready entry without a record, or whose item is in another state (a
-- stray), is dropped and reported; an item whose record or attempts are
-- outside the limits (see `unusable`) is quarantined to Dead and reported,
-- never leased.
-- The leases join the group of their family, one member of `lease:groups`
-- for the claim.
-- Keys read before the first write need no guard: HLEN, ZSCORE, HGET fail
-- on a wrong type, and the script stops having written nothing.
-- One EXISTS answers the common case: no attempts recorded, nothing Dead
-- or Scheduled (no stray to look for there), so no key a quarantine writes
-- exists (a key that does not exist has no wrong type), and nobody follows
-- the queue's events (see `ev`).
local has_att, has_dead, has_sched = false, false, false
local bad
if redis.call('EXISTS', K_ATT, K_DEAD, K_SCHED, K_DSEQ, K_ERR, QUEUE_TAG .. 'events:on') == 0 then
  EV = false
else
  bad = guard(K_ATT, K_DEAD, K_DSEQ, K_ERR)
  if bad then return bad end
  has_att = redis.call('EXISTS', K_ATT) == 1
  has_dead = redis.call('EXISTS', K_DEAD) == 1
  has_sched = redis.call('EXISTS', K_SCHED) == 1
end
bad = guard(K_ITEMS, K_GIDS, K_GLIVE)
if bad then return bad end
local ttl, max = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local exp = now + ttl
local exp_s = fmt_int(exp)
local TOKENS = ARGV[4]
local fam = string.sub(TOKENS, 1, 24)
-- A group has one expiry. When the family's group already holds leases of
-- another expiry (an earlier sub-claim of the same claim, made by a layer,
-- or a claim sent again), these go to a group of their own, and each lease
-- is recorded as moved there.
local group = fam
local cur = tonumber(redis.call('ZSCORE', K_GROUPS, fam))
if cur and cur ~= exp then
  bad = guard(K_MOVED)
  if bad then return bad end
  group = fam .. ':' .. exp_s
end
-- A group that exists has its id list (read here, before any write).
local listed = cur and redis.call('HGET', K_GIDS, group)
local allowed, refused, paused = limits_admit(now, max)
if refused then return refused end
if paused then return { '', {}, false, {}, 0, false, exp, 1 } end
max = allowed
local repairs = {}
local out_ids, out_recs, out_atts = {}, {}, false
if has_att then out_atts = {} end
if has_sched then promote_due(now, repairs) end

-- Up to `k` Ready entries in claim order, taken out of the Ready indexes:
-- their decimal ids (a malformed entry is reported and dropped), and how
-- many entries were taken. The common case, an empty ranked index, is one
-- LPOP.
local function take_ready(k)
  if redis.call('ZCARD', K_READY) == 0 then
    local ids = redis.call('LPOP', K_FIFO, k) or {}
    return ids, #ids
  end
  local ids, zrem, from_fifo = ready_head(k, repairs)
  if from_fifo > 0 then redis.call('LPOP', K_FIFO, from_fifo) end
  call_chunked('ZREM', K_READY, zrem)
  return ids, #zrem + from_fifo
end


local toks, n = {}, 0
-- Read before the first pop (a wrong type fails it there). Every write of
-- the token index writes its wide field too; whether it is there already
-- is asked, not assumed, so the count of new fields below is exact.
local tok_fields = redis.call('HLEN', K_TOK)
local wide_new = tok_fields == 0 or redis.call('HEXISTS', K_TOK, WIDE_FIELD) == 0
local any_leased = tok_fields > (wide_new and 0 or 1)
local find, sub = string.find, string.sub
local examined, budget, more = 0, max + 1000, 0
-- True when every entry taken has a record with the prefix of one found
-- valid (the first record is checked in full when none was yet): no
-- repair to make, so the take's own tables are the reply.
local function all_plain(ids, recs)
  if not LAST_PRE and not (recs[1] and tonumber(ids[1]) and parse_record(recs[1])) then return false end
  for i = 1, #ids do
    local rec = recs[i]
    if not rec or find(rec, LAST_PRE, 1, true) ~= 1 then return false end
  end
  return true
end
while n < max do
  local ids, taken = take_ready(max - n)
  if taken == 0 then break end
  examined = examined + taken
  local recs = read_chunked('HMGET', K_ITEMS, ids)
  -- Strays: an entry of an item that is Leased, Dead or Scheduled. Each
  -- check costs one command, made only when that state holds any item.
  local leased = any_leased and read_chunked('HMGET', K_TOK, ids)
  local dead, sched = false, false
  if has_dead or has_sched then
    local ms = {}
    for i, s in ipairs(ids) do ms[i] = member(tonumber(s) or 0) end
    if has_dead then dead = read_chunked('ZMSCORE', K_DEAD, ms) end
    if has_sched then sched = read_chunked('ZMSCORE', K_SCHED, ms) end
  end
  local atts = has_att and read_chunked('HMGET', K_ATT, ids)
  if n == 0 and not atts and not leased and not dead and not sched and all_plain(ids, recs) then
    out_ids, out_recs, n = ids, recs, #ids
    for k = 1, n do
      toks[2 * k - 1], toks[2 * k] = ids[k], sub(TOKENS, 32 * k - 31, 32 * k)
    end
  else
    for i, id_s in ipairs(ids) do
      local rec = recs[i]
      -- The common case, checked first: a record with the prefix of the last
      -- one found valid, no attempts recorded, no stray.
      if rec and LAST_PRE and not atts and not leased and not dead and not sched and find(rec, LAST_PRE, 1, true) == 1 then
        n = n + 1
        out_ids[n], out_recs[n] = id_s, rec
        toks[2 * n - 1], toks[2 * n] = id_s, sub(TOKENS, 32 * n - 31, 32 * n)
      else
        local id = tonumber(id_s)
        if not rec then
          add_repair(repairs, 'ready', id or 0, 'item is missing')
        elseif not id then
          add_repair(repairs, 'ready', 0, 'malformed index entry ' .. string.sub(id_s, 1, 64))
        elseif leased and leased[i] then
          add_repair(repairs, 'ready', id, 'duplicate entry: the item is leased')
        elseif dead and dead[i] then
          add_repair(repairs, 'ready', id, 'duplicate entry: the item is dead')
        elseif sched and sched[i] then
          add_repair(repairs, 'ready', id, 'duplicate entry: the item is scheduled')
        else
          local problem, _r, att = unusable(rec, atts and atts[i])
          if problem then
            -- Poison: moved aside, never leased (so never handed out unreturned).
            quarantine(id, 'ready', problem, repairs)
          else
            n = n + 1
            out_ids[n], out_recs[n] = id_s, rec
            if out_atts then out_atts[n] = att + 1 end
            toks[2 * n - 1], toks[2 * n] = id_s, string.sub(TOKENS, 32 * n - 31, 32 * n)
          end
        end
      end
    end
  end
  if examined >= budget and n < max then
    more = 1
    break
  end
end
-- An id met twice in this call (the Ready indexes listed it twice): the
-- token index took fewer new fields than leases. Each id keeps its first
-- lease; a later one is reported, the leases after it move up a slot (lease
-- k holds the k-th token), and the call asks to be made again for the
-- slots it freed.
local function drop_repeats()
  local seen, ids, recs, atts = {}, {}, {}, out_atts and {}
  for k = 1, n do
    local id_s = out_ids[k]
    if seen[id_s] then
      add_repair(repairs, 'ready', tonumber(id_s), 'duplicate entry: the item is leased')
    else
      seen[id_s] = true
      ids[#ids + 1], recs[#recs + 1] = id_s, out_recs[k]
      if atts then atts[#ids] = out_atts[k] end
    end
  end
  out_ids, out_recs, out_atts, n, toks = ids, recs, atts or false, #ids, {}
  for k = 1, n do
    toks[2 * k - 1], toks[2 * k] = ids[k], sub(TOKENS, 32 * k - 31, 32 * k)
  end
  call_chunked('HSET', K_TOK, toks)
  more = 1
end

if n > 0 then
  if hset_wide(K_TOK, toks) ~= n + (wide_new and 1 or 0) then drop_repeats() end
  untrace(toks)
  if group ~= fam then
    local mv = {}
    for k = 1, n do
      mv[2 * k - 1], mv[2 * k] = out_ids[k], group
    end
    call_chunked('HSET', K_MOVED, mv)
  end
  redis.call('ZADD', K_GROUPS, exp_s, group)
  local list = table.concat(out_ids, ',')
  if listed then list = listed .. ',' .. list end
  redis.call('HSET', K_GIDS, group, list)
  redis.call('HINCRBY', K_GLIVE, group, n)
  if ev() then
    for k = 1, n do ev('started', out_ids[k], fmt_int(out_atts and out_atts[k] or 1)) end
  end
end
ev_flush()
return { table.concat(out_ids, ','), out_recs, out_atts, repairs, more, limits_done(n), exp }
