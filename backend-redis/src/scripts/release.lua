-- release: ARGV[2] = id, ARGV[3] = token, ARGV[4] = delay ms.
-- Returns 0 lost, 1 ready, 2 scheduled, 3 dead (attempts exhausted, or
-- quarantined: fields outside the limits, see `unusable`).
local bad = guard(K_LEASED, K_READY, K_SCHED, K_DEAD, K_DSEQ)
if bad then return bad end
local id = tonumber(ARGV[2])
local k, f = fenced(id, ARGV[3])
if not k then return 0 end
local m = member(id)
local problem = unusable(f[3], f[4], f[5], false)
if problem then
  -- Poison planted while leased: it goes where a claim would put it.
  to_dead(m, k, 'leased', 'quarantined: ' .. problem)
  return 3
end
if tonumber(f[3]) >= tonumber(f[4]) then
  to_dead(m, k, 'leased', 'attempts exhausted')
  return 3
end
local delay = tonumber(ARGV[4])
if delay > 0 then
  to_scheduled(m, k, 'leased', now_ms() + delay)
  return 2
end
to_ready(m, k, 'leased', f[5])
notify(1)
return 1
