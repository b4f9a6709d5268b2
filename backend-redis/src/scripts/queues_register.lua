-- queues_register: K_EXTRA = the registry of queues, KEYS[3] = the
-- registry's id floor (the highest id any deleted queue handed out);
-- ARGV[2] = a queue, ARGV[3] = the fresh token it is registered under
-- (replacing any other). Returns the id floor (0: none), where a queue with
-- no id counter starts.
local K_REG = K_EXTRA
local t = key_type(K_REG)
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REG .. ' holds a ' .. t .. ', expected a hash')
end
redis.call('HSET', K_REG, ARGV[2], ARGV[3])
local floor = redis.call('GET', KEYS[3])
if not floor then return 0 end
local n = int_field(floor, 0, ID_MAX)
if not n then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. KEYS[3] .. ' holds ' .. shown(floor) .. ', expected an id')
end
return n
