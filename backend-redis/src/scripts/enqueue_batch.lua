-- The write of one enqueue batch, shared by `enqueue` and `enqueue_once`.
-- ARGV[base] = n, then per item: payload, priority, delay ms, max attempts,
-- dedup key ('' = none). Returns per item { id, deduplicated (0/1) }, or an
-- error reply (a table with `err`) for the caller to return.
local function enqueue_batch(base)
  local bad = guard(K_READY, K_SCHED, K_SEQ, K_DEDUP)
  if bad then return bad end
  local now = now_ms()
  local now_s = fmt_int(now)
  local n = tonumber(ARGV[base])
  -- First pass, reads only: which items a dedup key holder absorbs (an older
  -- item, or the first item of this batch with the key), and how many are new.
  local holder, first_of, fresh = {}, {}, 0
  for i = 0, n - 1 do
    local dk = ARGV[base + 1 + i * 5 + 4]
    if dk ~= '' and first_of[dk] then
      holder[i] = -first_of[dk] - 1
    else
      if dk ~= '' then
        local hid = tonumber(redis.call('HGET', K_DEDUP, dk))
        if hid and key_type(item_key(hid)) == 'hash' then holder[i] = hid end
      end
      if not holder[i] then
        fresh = fresh + 1
        if dk ~= '' then first_of[dk] = i end
      end
    end
  end
  -- One INCRBY for the batch's ids, and one EXISTS over their keys. When the
  -- counter was reset behind existing items, ids whose keys exist are skipped
  -- one by one.
  local hi = 0
  if fresh > 0 then hi = redis.call('INCRBY', K_SEQ, fresh) end
  local nxt = hi - fresh + 1
  local range_free = false
  if fresh > 0 then
    local ks = {}
    for id = nxt, hi do ks[#ks + 1] = item_key(id) end
    range_free = call_chunked('EXISTS', nil, ks) == 0
  end
  local function next_id()
    if range_free then
      local id = nxt
      nxt = nxt + 1
      return id
    end
    for _ = 1, 10000 do
      local id
      if nxt <= hi then
        id = nxt
        nxt = nxt + 1
      else
        id = redis.call('INCR', K_SEQ)
        hi, nxt = id, id + 1
      end
      if redis.call('EXISTS', item_key(id)) == 0 then return id end
    end
    return nil
  end
  local out, ids, ready, sched = {}, {}, {}, {}
  local readied = 0
  for i = 0, n - 1 do
    local b = base + 1 + i * 5
    local h = holder[i]
    if h and h >= 0 then
      out[#out + 1] = { h, 1 }
    elseif h then
      out[#out + 1] = { ids[-h - 1], 1 }
    else
      -- Priority and max attempts go on as the client sent them (decimal
      -- integers); Lua numbers would be formatted as floats on every call.
      local payload, pri, delay, maxa, dk = ARGV[b], ARGV[b + 1], tonumber(ARGV[b + 2]), ARGV[b + 3], ARGV[b + 4]
      local id = next_id()
      if not id then
        -- The items written so far keep their index entries.
        call_chunked('ZADD', K_READY, ready)
        call_chunked('ZADD', K_SCHED, sched)
        return redis.error_reply('LEASEQ_CORRUPT id counter ' .. K_SEQ .. ' is behind existing items')
      end
      ids[i] = id
      local k, m = item_key(id), member(id)
      if delay > 0 then
        local due = fmt_int(now + delay)
        redis.call('HSET', k, 'p', payload, 'pri', pri, 'att', '0', 'max', maxa, 'enq', now_s,
                   'st', 'scheduled', 'due', due)
        sched[#sched + 1] = due
        sched[#sched + 1] = m
      else
        redis.call('HSET', k, 'p', payload, 'pri', pri, 'att', '0', 'max', maxa, 'enq', now_s, 'st', 'ready')
        ready[#ready + 1] = neg(pri)
        ready[#ready + 1] = m
        readied = readied + 1
      end
      if dk ~= '' then
        redis.call('HSET', k, 'dk', dk)
        redis.call('HSET', K_DEDUP, dk, id)
      end
      out[#out + 1] = { id, 0 }
    end
  end
  call_chunked('ZADD', K_READY, ready)
  call_chunked('ZADD', K_SCHED, sched)
  notify(readied)
  return out
end
