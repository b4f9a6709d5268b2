-- queues_registry: K_EXTRA = the registry of queues (a hash: queue -> the
-- token it was last registered under). ARGV[2] = 'all': every field and
-- value; or 'get' and a queue: its token ('' when not registered); or 'drop' followed by pairs of queue and token: each queue's field
-- is deleted only while it still holds that token (a registration made
-- since keeps it); or 'raise' and an id: KEYS[3], the id floor, becomes at
-- least that id. Returns the fields and values, the token, how many were
-- deleted, or the floor.
local K_REG = K_EXTRA
if ARGV[2] == 'raise' then
  local stored = redis.call('GET', KEYS[3])
  local floor = int_field(stored, 0, ID_MAX)
  if stored and not floor then
    return redis.error_reply('LEASEQ_CORRUPT key ' .. KEYS[3] .. ' holds ' .. shown(stored) .. ', expected an id')
  end
  floor = floor or 0
  local id = int_field(ARGV[3], 0, ID_MAX) or 0
  if id > floor then
    floor = id
    redis.call('SET', KEYS[3], fmt_int(floor))
  end
  return floor
end
local t = key_type(K_REG)
if t ~= 'none' and t ~= 'hash' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REG .. ' holds a ' .. t .. ', expected a hash')
end
if ARGV[2] == 'all' then return redis.call('HGETALL', K_REG) end
if ARGV[2] == 'get' then return redis.call('HGET', K_REG, ARGV[3]) or '' end
local dropped = 0
for i = 3, #ARGV - 1, 2 do
  if redis.call('HGET', K_REG, ARGV[i]) == ARGV[i + 1] then
    dropped = dropped + redis.call('HDEL', K_REG, ARGV[i])
  end
end
return dropped
