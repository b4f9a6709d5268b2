-- queues_register: KEYS[10] = the registry of queues; ARGV[2] = a queue,
-- ARGV[3] = the fresh token it is registered under (replacing any other).
local K_REG = KEYS[10]
local t = key_type(K_REG)
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REG .. ' holds a ' .. t .. ', expected a hash')
end
redis.call('HSET', K_REG, ARGV[2], ARGV[3])
return 1
