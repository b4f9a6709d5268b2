-- test hook: ARGV[2] = id, ARGV[3] = a poison kind. Writes into the item's
-- hash a value the hash can hold but no script may use (see `unusable`).
-- Returns 1, or 0 when there is no item.
local id = tonumber(ARGV[2])
local k = item_key(id)
if key_type(k) ~= 'hash' then return 0 end
local kind = ARGV[3]
if kind == 'attempts_at_limit' then
  redis.call('HSET', k, 'att', fmt_int(ATT_MAX))
elseif kind == 'negative_attempts' then
  redis.call('HSET', k, 'att', '-1')
elseif kind == 'bad_max_attempts' then
  redis.call('HSET', k, 'max', '0')
elseif kind == 'priority_out_of_range' then
  redis.call('HSET', k, 'pri', fmt_int(PRI_MAX + 1))
elseif kind == 'not_a_number' then
  redis.call('HSET', k, 'att', 'many')
elseif kind == 'missing_payload' then
  redis.call('HDEL', k, 'p')
else
  return redis.error_reply('ERR unknown poison kind ' .. tostring(kind))
end
return 1
