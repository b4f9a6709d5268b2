-- queues_registry: KEYS[10] = the registry of queues (a hash: queue -> the
-- token it was last registered under). ARGV[2] = 'all': every field and
-- value; or 'drop' followed by pairs of queue and token: each queue's field
-- is deleted only while it still holds that token (a registration made
-- since keeps it). Returns the fields and values, or how many were deleted.
local K_REG = KEYS[10]
local t = key_type(K_REG)
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REG .. ' holds a ' .. t .. ', expected a hash')
end
if ARGV[2] == 'all' then return redis.call('HGETALL', K_REG) end
local dropped = 0
for i = 3, #ARGV - 1, 2 do
  if redis.call('HGET', K_REG, ARGV[i]) == ARGV[i + 1] then
    dropped = dropped + redis.call('HDEL', K_REG, ARGV[i])
  end
end
return dropped
