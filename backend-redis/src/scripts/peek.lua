-- peek: ARGV[2] = state, ARGV[3] = limit. Items in index order; due Scheduled
-- items are promoted first so Ready shows claim order. Entries without an
-- item are left for claim and reap to repair. An item whose fields are
-- outside the limits (see `unusable`) is quarantined as a claim would do it
-- (see `inspect_poison`): a Ready or Scheduled one moves to Dead and is left
-- out of a Ready or Scheduled listing.
-- Returns { items, repairs }.
local bad = guard_indexes()
if bad then return bad end
local state, limit = ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local repairs = {}
promote_due(now, repairs)
local out = {}
local ms = redis.call('ZRANGE', INDEX[state], 0, limit - 1)
for _, m in ipairs(ms) do
  local id = tonumber(m)
  if id then
    local k = item_key(id)
    if key_type(k) == 'hash' then
      local rec, problem, home = item_record(id, k, now)
      local moved = problem and inspect_poison(rec, problem, home, repairs)
      if not moved or state == 'dead' then out[#out + 1] = rec end
    end
  end
end
return { out, repairs }
