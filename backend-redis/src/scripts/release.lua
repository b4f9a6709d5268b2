-- release: ARGV[2] = id, ARGV[3] = token, ARGV[4] = delay ms.
-- Returns 0 lost, 1 ready, 2 scheduled, 3 dead (attempts exhausted).
local bad = guard()
if bad then return bad end
local id = tonumber(ARGV[2])
local k = fenced(id, ARGV[3])
if not k then return 0 end
local m = member(id)
local f = redis.call('HMGET', k, 'att', 'max')
if (tonumber(f[1]) or 0) >= (tonumber(f[2]) or 1) then
  to_dead(m, k, 'attempts exhausted')
  return 3
end
local delay = tonumber(ARGV[4])
if delay > 0 then
  to_scheduled(m, k, now_ms() + delay)
  return 2
end
to_ready(m, k)
notify(1)
return 1
