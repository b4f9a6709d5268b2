-- schedule_index: K_EXTRA = the index of schedules (a hash: name -> queue).
-- ARGV[2] = 'get' name | 'set' name queue | 'del' name | 'all'.
local K_IDX = K_EXTRA
local t = key_type(K_IDX)
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_IDX .. ' holds a ' .. t .. ', expected a hash')
end
local op = ARGV[2]
if op == 'get' then return redis.call('HGET', K_IDX, ARGV[3]) end
if op == 'set' then return redis.call('HSET', K_IDX, ARGV[3], ARGV[4]) end
if op == 'del' then return redis.call('HDEL', K_IDX, ARGV[3]) end
return redis.call('HGETALL', K_IDX)
