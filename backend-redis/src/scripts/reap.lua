-- reap: ARGV[2] = batch size. Reads only leases expired at the server's now.
-- Returns { requeued, dead, repairs, more } where more = 1 when the batch was full.
local bad = guard_indexes()
if bad then return bad end
local batch = tonumber(ARGV[2])
local now = now_ms()
local repairs = {}
promote_due(now, repairs)
local ms = redis.call('ZRANGEBYSCORE', K_LEASED, '-inf', now, 'LIMIT', 0, batch)
local requeued, dead = 0, 0
for _, m in ipairs(ms) do
  local id, k, f = check_entry('leased', m, repairs)
  local problem = id and unusable(f[2], f[3], f[4], false)
  if problem then
    quarantine(m, id, k, 'leased', problem, repairs)
  elseif id then
    if tonumber(f[2]) >= tonumber(f[3]) then
      to_dead(m, k, 'leased', 'lease expired on final attempt')
      dead = dead + 1
    else
      to_ready(m, k, 'leased', f[4])
      requeued = requeued + 1
    end
  end
end
notify(requeued)
local more = 0
if #ms >= batch then more = 1 end
return { requeued, dead, repairs, more }
