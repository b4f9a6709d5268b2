-- schedule_put: K_EXTRA = the schedule's record. ARGV[2] = name,
-- ARGV[3] = spec, ARGV[4] = payload, ARGV[5] = a revision carried over from
-- the queue the schedule moved from ('' = none), ARGV[6] = its last tick
-- ('' = none). Unchanged (same spec and payload): writes nothing.
-- Returns { revision, defined at, last tick ('' = none) }.
local K_REC = K_EXTRA
local t = key_type(K_REC)
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REC .. ' holds a ' .. t .. ', expected a hash')
end
local f = redis.call('HMGET', K_REC, 'spec', 'p', 'rev', 'def', 'last')
if f[3] and f[1] == ARGV[3] and f[2] == ARGV[4] then
  return { f[3], f[4] or '0', f[5] or '' }
end
-- A revision and a last tick carried over from a move count too (the
-- higher wins), so no revision is used twice and no tick fires again.
local rev = math.max(tonumber(f[3]) or 0, tonumber(ARGV[5]) or 0) + 1
local last = f[5]
local carried = tonumber(ARGV[6])
if carried and (not last or carried > (tonumber(last) or 0)) then last = ARGV[6] end
local now = fmt_int(now_ms())
redis.call('HSET', K_REC, 'name', ARGV[2], 'spec', ARGV[3], 'p', ARGV[4], 'rev', fmt_int(rev), 'def', now)
if last then redis.call('HSET', K_REC, 'last', last) end
return { fmt_int(rev), now, last or '' }
