-- test hook: ARGV[2] = id, ARGV[3] = a poison kind. Writes into the item's
-- record or attempts a value the store can hold but no script may use (see
-- `unusable`). Returns 1, or 0 when there is no item.
local id_s = ARGV[2]
local rec = redis.call('HGET', K_ITEMS, id_s)
if not rec then return 0 end
local e, m, p, rest = string.match(rec, '^([^,]*),([^,]*),([^,]*),()')
local kind = ARGV[3]
if kind == 'attempts_at_limit' then
  redis.call('HSET', K_ATT, id_s, fmt_int(ATT_MAX))
elseif kind == 'negative_attempts' then
  redis.call('HSET', K_ATT, id_s, '-1')
elseif kind == 'bad_max_attempts' then
  redis.call('HSET', K_ITEMS, id_s, e .. ',0,' .. p .. ',' .. string.sub(rec, rest))
elseif kind == 'priority_out_of_range' then
  redis.call('HSET', K_ITEMS, id_s, e .. ',' .. m .. ',' .. fmt_int(PRI_MAX + 1) .. ',' .. string.sub(rec, rest))
elseif kind == 'not_a_number' then
  redis.call('HSET', K_ATT, id_s, 'many')
elseif kind == 'missing_payload' then
  redis.call('HSET', K_ITEMS, id_s, e .. ',' .. m .. ',' .. p)
else
  return redis.error_reply('ERR unknown poison kind ' .. tostring(kind))
end
return 1
