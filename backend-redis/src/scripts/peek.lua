-- peek: ARGV[2] = state, ARGV[3] = limit. Items in index order (Ready: claim
-- order; Scheduled: due time; Leased: expiry; Dead: death order); due
-- Scheduled items are promoted first so Ready shows claim order. Entries
-- without an item are left for claim and reap to repair. An item whose
-- record or attempts are outside the limits (see `unusable`) is quarantined
-- as a claim would do it (see `inspect_poison`): a Ready or Scheduled one
-- moves to Dead and is left out of a Ready or Scheduled listing.
-- Returns { items, repairs }.
local bad = guard_all()
if bad then return bad end
local state, limit = ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local repairs = {}
promote_due(now, repairs)
local ids = {}
if state == 'ready' then
  ids = ready_head(limit)
elseif state == 'leased' then
  local page = 0
  while #ids < limit do
    local gs = redis.call('ZRANGE', K_GROUPS, page, page + 99)
    if #gs == 0 then break end
    for _, g in ipairs(gs) do
      for _, id_s in ipairs(group_ids(g)) do
        if #ids < limit then ids[#ids + 1] = id_s end
      end
    end
    page = page + 100
  end
else
  local key = K_SCHED
  if state == 'dead' then key = K_DEAD end
  for _, m in ipairs(redis.call('ZRANGE', key, 0, limit - 1)) do
    local id = member_id(m)
    if id then ids[#ids + 1] = fmt_int(id) end
  end
end
local out = {}
for _, id_s in ipairs(ids) do
  local id = decimal_id(id_s)
  local rec, problem, home = nil, nil, nil
  if id then rec, problem, home = item_record(id, now) end
  if rec then
    local moved = problem and inspect_poison(rec, problem, home, repairs)
    if not moved or state == 'dead' then out[#out + 1] = rec end
  end
end
ev_flush()
return { out, repairs }
