-- limits_set: K_EXTRA = the queue's limits hash; ARGV[2] = concurrency,
-- ARGV[3] = rate claims, ARGV[4] = rate window (ms); '' for a limit not set.
-- Replaces both limits. The window's count is kept while a rate is set,
-- and dropped with it; no limit at all deletes the key unless the queue is
-- paused (its `paused` field is never touched here). Returns 1.
local t = key_type(K_LIMITS)
if t ~= 'none' and t ~= 'hash' then redis.call('DEL', K_LIMITS) end
local conc, rate, per = ARGV[2], ARGV[3], ARGV[4]
if conc == '' and rate == '' then
  redis.call('HDEL', K_LIMITS, 'conc', 'rate', 'per', 'win', 'used')
  return 1
end
if conc == '' then
  redis.call('HDEL', K_LIMITS, 'conc')
else
  redis.call('HSET', K_LIMITS, 'conc', conc)
end
if rate == '' then
  redis.call('HDEL', K_LIMITS, 'rate', 'per', 'win', 'used')
else
  redis.call('HSET', K_LIMITS, 'rate', rate, 'per', per)
end
return 1
