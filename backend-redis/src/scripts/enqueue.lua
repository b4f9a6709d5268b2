-- enqueue: ARGV[2] = n, then per item: payload, priority, delay ms, max attempts, dedup key ('' = none).
-- Returns per item { id, deduplicated (0/1) }.
local bad = guard()
if bad then return bad end
local now = now_ms()
local n = tonumber(ARGV[2])
local out = {}
local readied = 0
for i = 0, n - 1 do
  local b = 3 + i * 5
  local payload, pri, delay, maxa, dk = ARGV[b], tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), ARGV[b + 3], ARGV[b + 4]
  local held = nil
  if dk ~= '' then
    local hid = tonumber(redis.call('HGET', K_DEDUP, dk))
    if hid and key_type(item_key(hid)) == 'hash' then held = hid end
  end
  if held then
    out[#out + 1] = { held, 1 }
  else
    local id = redis.call('INCR', K_SEQ)
    local tries = 0
    while redis.call('EXISTS', item_key(id)) == 1 do
      -- The counter fell behind existing items (it was reset): skip ahead.
      tries = tries + 1
      if tries > 10000 then
        return redis.error_reply('LEASEQ_CORRUPT id counter ' .. K_SEQ .. ' is behind existing items')
      end
      id = redis.call('INCR', K_SEQ)
    end
    local k, m = item_key(id), member(id)
    redis.call('HSET', k, 'p', payload, 'pri', pri, 'att', 0, 'max', maxa, 'enq', now)
    if dk ~= '' then
      redis.call('HSET', k, 'dk', dk)
      redis.call('HSET', K_DEDUP, dk, id)
    end
    if delay > 0 then
      to_scheduled(m, k, now + delay)
    else
      to_ready(m, k)
      readied = readied + 1
    end
    out[#out + 1] = { id, 0 }
  end
end
notify(readied)
return out
