-- reap: ARGV[2] = batch size (lease groups). Reads only groups expired at
-- the server's now: its cost grows with the expired groups and their ids,
-- never with the live leases.
-- Returns { requeued, dead, repairs, more } where more = 1 when the batch
-- was full.
local bad = guard_all()
if bad then return bad end
local batch = tonumber(ARGV[2])
local now = now_ms()
local repairs = {}
promote_due(now, repairs)
local gs = redis.call('ZRANGEBYSCORE', K_GROUPS, '-inf', now, 'LIMIT', 0, batch)
local requeued, dead = 0, 0
for _, g in ipairs(gs) do
  -- The group's list is not pruned on ack: `group_ids` keeps the ids whose
  -- lease is still in this group.
  local ids = group_ids(g, repairs)
  redis.call('ZREM', K_GROUPS, g)
  redis.call('HDEL', K_GIDS, g)
  redis.call('HDEL', K_GLIVE, g)
  if #ids > 0 then
    local recs = read_chunked('HMGET', K_ITEMS, ids)
    local atts = read_chunked('HMGET', K_ATT, ids)
    call_chunked('HDEL', K_TOK, ids)
    call_chunked('HDEL', K_MOVED, ids)
    for i, id_s in ipairs(ids) do
      local id = tonumber(id_s)
      if not recs[i] then
        add_repair(repairs, 'leased', id, 'item is missing')
      else
        local problem, r, att = unusable(recs[i], atts[i])
        if problem then
          quarantine(id, 'leased', problem, repairs)
        elseif after_attempt(id, r, att, 'lease expired on final attempt') == 'dead' then
          dead = dead + 1
        else
          requeued = requeued + 1
        end
      end
    end
  end
end
notify(requeued)
local more = 0
if #gs >= batch then more = 1 end
return { requeued, dead, repairs, more }
