-- reap: ARGV[2] = batch size (lease groups). Reads only groups expired at
-- the server's now: its cost grows with the expired groups and their ids,
-- never with the live leases.
-- Returns { requeued, dead, repairs, more, cancelled } where more = 1 when
-- the batch was full. An expired lease of an item an operator asked to
-- cancel (leaseq_core::Control::cancel) ends Cancelled: the item is
-- deleted (its dedup key freed, no unique-for hold), counted in cancelled.
-- Every key it reads is read before its first write (a wrong type fails
-- the read, and the script stops having written nothing), so only the
-- other keys are guarded.
-- leaseq_core::limits::LEASE_HORIZON, in ms.
local LEASE_HORIZON_MS = 691200000
local batch = tonumber(ARGV[2])
local now = now_ms()
local repairs = {}
local gs = redis.call('ZRANGEBYSCORE', K_GROUPS, '-inf', now, 'LIMIT', 0, batch)
-- Groups expiring past the lease horizon (no claim or extend sets one; a
-- clock that ran ahead did) are expired too, each of their ids reported.
local far = {}
if #gs < batch then
  local past = redis.call('ZRANGEBYSCORE', K_GROUPS, '(' .. fmt_int(now + LEASE_HORIZON_MS), '+inf',
                          'LIMIT', 0, batch - #gs)
  for _, g in ipairs(past) do
    far[g] = true
    gs[#gs + 1] = g
  end
end
local due = #redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', now, 'LIMIT', 0, 1) > 0
local read = { [K_GROUPS] = true, [K_SCHED] = true }
if #gs == 0 and not due then
  return guard_unread(read) or { 0, 0, repairs, 0, 0 }
end

-- The ids whose lease is in an expired group, each once, with their
-- records and attempts. A group's list is not pruned on ack or release:
-- an id whose lease now lives elsewhere (or nowhere) is left out.
local ids, id_toks = {}, {}
if #gs > 0 then
  local lists = read_chunked('HMGET', K_GIDS, gs)
  local listed, of = {}, {}
  for k, g in ipairs(gs) do
    for s in string.gmatch(lists[k] or '', '[^,]+') do
      if decimal_id(s) then
        listed[#listed + 1], of[#listed + 1] = s, g
      else
        add_repair(repairs, 'leased', 0,
          'malformed entry ' .. string.sub(s, 1, 64) .. ' in lease group ' .. string.sub(g, 1, 64))
      end
    end
  end
  read[K_GIDS] = true
  if #listed > 0 then
    read[K_TOK], read[K_MOVED] = true, true
    local toks = read_chunked('HMGET', K_TOK, listed)
    local moved = read_chunked('HMGET', K_MOVED, listed)
    local seen = {}
    for i, s in ipairs(listed) do
      local t, x, g = toks[i], moved[i], of[i]
      if t and not seen[s] and ((x and x == g) or (not x and string.sub(t, 1, 24) == g)) then
        seen[s] = true
        ids[#ids + 1] = s
        id_toks[#ids] = t
        if far[g] then
          add_repair(repairs, 'leased', tonumber(s),
            'lease expiry is past the lease horizon (a clock that ran ahead?): expired now')
        end
      end
    end
  end
end
local recs = read_chunked('HMGET', K_ITEMS, ids)
local atts = read_chunked('HMGET', K_ATT, ids)

-- What becomes of each: Ready, Dead (its last attempt), quarantined, or
-- nothing (no record).
local fate, usable, tried = {}, {}, {}
for i = 1, #ids do
  if not recs[i] then
    fate[i] = 'missing'
  else
    local problem, r, att = unusable(recs[i], atts[i])
    if problem then
      fate[i], usable[i] = 'poison', problem
    else
      usable[i], tried[i] = r, att + 1
      if tried[i] >= tonumber(r[2]) then fate[i] = 'dead' else fate[i] = 'ready' end
    end
  end
end
if #ids > 0 then read[K_ITEMS], read[K_ATT] = true, true end
local bad = guard_unread(read)
if bad then return bad end
-- Cancel requests and progress end with the leases (read and checked
-- before the first write: a cancelled item's deletion touches the dedup
-- keys too).
local keep = nil
if #ids > 0 and redis.call('EXISTS', K_CANCEL) == 1 then
  bad = guard(K_DEDUP, K_DK, K_UF)
  if bad then return bad end
  keep = retention()
end
local cancel = #ids > 0 and end_control(ids, id_toks)
-- Cancelled leases are kept as such when the policy says so, before their
-- records go.
if cancel and keep and keep.cancelled then
  local ended = {}
  for _, id_s in ipairs(ids) do
    if cancel[id_s] then ended[#ended + 1] = id_s end
  end
  keep_items(keep, ended, true, 1, now)
end

if due then promote_due(now, repairs) end
local requeued, dead, cancelled = 0, 0, 0
if #gs > 0 then
  call_chunked('ZREM', K_GROUPS, gs)
  call_chunked('HDEL', K_GIDS, gs)
  call_chunked('HDEL', K_GLIVE, gs)
end
if #ids > 0 then
  call_chunked('HDEL', K_TOK, ids)
  call_chunked('HDEL', K_MOVED, ids)
  trace_taken(ids, id_toks, now)
  local att_pairs, ready = {}, {}
  for i, id_s in ipairs(ids) do
    local id, f = tonumber(id_s), fate[i]
    if f == 'missing' then
      add_repair(repairs, 'leased', id, 'item is missing')
    elseif cancel and cancel[id_s] then
      drop_record(id_s)
      ev('cancelled', id_s)
      cancelled = cancelled + 1
    elseif f == 'poison' then
      quarantine(id, 'leased', usable[i], repairs)
    else
      local a = #att_pairs
      att_pairs[a + 1], att_pairs[a + 2] = id_s, fmt_int(tried[i])
      if f == 'dead' then
        to_dead(id, 'lease expired on final attempt', now)
        dead = dead + 1
      else
        local z = #ready
        ready[z + 1], ready[z + 2] = 0 - tonumber(usable[i][3]), member(id)
        ev('failed', id_s, nil, 'lease expired')
        requeued = requeued + 1
      end
    end
  end
  call_chunked('HSET', K_ATT, att_pairs)
  zadd_batch(K_READY, ready)
end
notify(requeued)
ev_flush()
local more = 0
if #gs >= batch then more = 1 end
return { requeued, dead, repairs, more, cancelled }
