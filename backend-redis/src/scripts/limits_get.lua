-- limits_get: K_EXTRA = the queue's limits hash. Returns { concurrency,
-- rate claims, rate window ms }, each false when not set (or unusable).
if key_type(K_LIMITS) ~= 'hash' then return { false, false, false } end
local f = redis.call('HMGET', K_LIMITS, 'conc', 'rate', 'per')
local conc = int_field(f[1], 1, 2147483647)
local rate, per = int_field(f[2], 1, 2147483647), int_field(f[3], 1, 86400000)
if not (rate and per) then rate, per = false, false end
return { conc or false, rate, per }
