-- The write of one enqueue batch, shared by `enqueue`, `enqueue_once` and
-- `schedule_fire`.
-- ARGV[base] = the token the client registered the queue under ('' =
-- none), ARGV[base + 1] = the prune generation it registered in,
-- ARGV[base + 2] = the registry's id floor that registration returned
-- (0: none; the highest id of any deleted queue, where a queue with no
-- counter starts), ARGV[base + 3] = the highest id the client has seen in
-- this queue (0: none), ARGV[base + 4] = n, ARGV[base + 5] = the batch's
-- form, then per item:
-- - form 'f' (no item has a priority, a delay, a dedup key or a hold): one
--   value, 'max,0,payload' (the record without its enqueue time);
-- - form 'g': payload, priority, delay ms, max attempts, dedup key ('' =
--   none), unique-for hold ms ('0' = none).
-- Returns (rows, note): one flat array with one integer per item, its id,
-- negated when the item was deduplicated (ids start at 1), and a note
-- (text, or nil) when the id counter had to be re-seeded; or an error reply
-- (a table with `err`) for the caller to return; or { unregistered = gen }
-- when the batch would give the queue its first item since it left the
-- listing and the client holds no registration of the current generation:
-- then nothing is written and the caller answers { 'unregistered', gen }
-- (see src/listing.rs).
--
-- All or nothing: every read comes first (the dedup holders, the listing,
-- the counter, whether each new id is free), so a batch that cannot be
-- written writes nothing, and the first write (the listing's or the
-- counter's SET, commands a server over `maxmemory` refuses as a script's
-- first write) comes before any item.
--
-- Ids: K_SEQ holds the last id handed out and K_MARK a second copy of it,
-- written together. The next id is 1 + the highest of the two and of the
-- client's floor (the highest id that client has seen in the queue: it
-- catches a server restarted from an older snapshot, which took both copies
-- back). When both copies are missing while the queue holds items, or when
-- a new id already has a record (a counter set back behind existing items),
-- the records are walked for their highest id and the counter re-seeded
-- past it.
-- K_RUN holds the server's replication id when the counter was last written.
-- A master with another one (a promoted replica, a restart) may hold a
-- counter taken back past ids the old history handed out and lost; the next
-- ids then start RUN_GAP above the counter, past any id issued unreplicated.
local ID_PAGE = 1000
local K_RUN = K_SEQ .. ':run'
local RUN_GAP = 4294967296

-- The server's replication id: a new one after a promotion or a restart;
-- nil where INFO is denied (an ACL), and then nothing is compared.
local function replication_id()
  local info = redis.pcall('INFO', 'replication')
  if type(info) ~= 'string' then return nil end
  return string.match(info, 'master_replid:(%w+)')
end

-- The highest id the queue holds a record of, 0 when it holds none. Walks
-- the records in bounded pages: its cost grows with the queue. It runs only
-- when the counter was lost or set back.
local function highest_indexed_id()
  local top, cursor = 0, '0'
  repeat
    local r = redis.call('HSCAN', K_ITEMS, cursor, 'COUNT', ID_PAGE)
    cursor = r[1]
    for i = 1, #r[2] - 1, 2 do
      local id = int_field(r[2][i], 1, ID_MAX)
      if id and id > top then top = id end
    end
  until cursor == '0'
  return top
end

-- How many of the ids after `last` (`n` of them) the queue holds a record
-- of, and those ids (decimal) in order. A queue that holds no record (the
-- wide field alone, or nothing) holds none of them: no HMGET.
local DIGITS = { '0', '1', '2', '3', '4', '5', '6', '7', '8', '9' }
local function taken_after(last, n)
  -- One format per ten ids, the last digit appended: a format costs more
  -- than a concatenation.
  local ids, id = {}, last + 1
  local d = id % 10
  local base, head = (id - d) / 10, nil
  for i = 1, n do
    if d == 10 or not head then
      if d == 10 then
        d = 0
        base = base + 1
      end
      head = base == 0 and '' or fmt_int(base)
    end
    ids[i] = head .. DIGITS[d + 1]
    d = d + 1
  end
  local taken = 0
  local held = redis.call('HLEN', K_ITEMS)
  if held == 0 or (held == 1 and redis.call('HEXISTS', K_ITEMS, WIDE_FIELD) == 1) then return taken, ids end
  for _, r in ipairs(read_chunked('HMGET', K_ITEMS, ids)) do
    if r then taken = taken + 1 end
  end
  return taken, ids
end

-- `n` new ids, rising, a note when the counter was re-seeded (or nil), and
-- the ids as decimal strings; or nil and an error line. Reads only. A queue
-- with no counter and no item (new, or deleted) starts above `start`, the
-- registry's floor: ids of a deleted queue are never handed out again.
-- `run`: the server's replication id; `ran`: the one K_RUN holds.
local function new_ids(n, floor, start, run, ran)
  local seq = int_field(redis.call('GET', K_SEQ), 0, ID_MAX)
  local mark = int_field(redis.call('GET', K_MARK), 0, ID_MAX)
  local last = math.max(seq or 0, mark or 0)
  local why, walked = nil, false
  if seq == nil and mark == nil then
    local held = item_count()
    if held > 0 then
      why = 'the id counter is missing while the queue holds ' .. fmt_int(held) .. ' items'
      last, walked = highest_indexed_id(), true
    end
    last = math.max(last, start)
  elseif seq == nil or seq < last then
    why = 'the id counter (' .. shown(redis.call('GET', K_SEQ)) .. ') is behind its copy (' .. fmt_int(last) .. ')'
  end
  if floor > last then
    why = why or ('the id counter (' .. fmt_int(last) .. ') is behind id ' .. fmt_int(floor)
      .. ' this client has seen: the server may have restarted from an older snapshot')
    last = floor
  end
  if run and ran and ran ~= run and last > 0 then
    why = (why and why .. '; ' or '') .. 'the id counter (' .. fmt_int(last) .. ') was written under replication id '
      .. shown(ran) .. ', the server now runs ' .. shown(run)
      .. ': a failover or restart may have lost ids handed out since; skipping ' .. fmt_int(RUN_GAP)
    last = last + RUN_GAP
  end
  local taken, keys = taken_after(last, n)
  if taken > 0 and not walked then
    why = why or ('the id counter (' .. fmt_int(last) .. ') is behind existing items')
    local top = highest_indexed_id()
    walked = true
    if top > last then
      last = top
      taken, keys = taken_after(last, n)
    end
  end
  -- After a walk no new id is taken below 2^53: the walk found the highest
  -- record id up to it. A taken id past that is past 2^53, refused below.
  local ids = {}
  for i = 1, n do ids[i] = last + i end
  if ids[n] > ID_MAX then
    return nil, 'LEASEQ_CORRUPT ids of queue ' .. K_SEQ .. ' ran past 2^53; nothing was written'
  end
  if why then why = why .. '; re-seeded: new ids from ' .. fmt_int(ids[1]) end
  return ids, why, keys
end

-- Nil when the queue may get new items now: it is `listed`, or the client
-- registered it (`token`) in the current prune generation (`gen`). Else
-- the current generation, for the client to register in. Reads only.
local function unregistered(listed, token, gen)
  if listed then return nil end
  local now_gen = redis.call('GET', K_LISTGEN) or '0'
  if token ~= '' and gen == now_gen then return nil end
  return now_gen
end

local function enqueue_batch(base)
  -- Every key is read before the first write (GET, HMGET, LINDEX fail on a
  -- wrong type, and the script stops having written nothing) but the ones
  -- guarded here.
  if ARGV[base + 5] ~= 'f' then
    local bad = guard(K_READY, K_SCHED, K_DEDUP, K_DK, K_UF)
    if bad then return bad end
  end
  local now = now_ms()
  local pre = fmt_int(now) .. ','
  local token = ARGV[base]
  local start = int_field(ARGV[base + 2], 0, ID_MAX) or 0
  local floor = int_field(ARGV[base + 3], 0, ID_MAX) or 0
  local n = tonumber(ARGV[base + 4])
  local plain = ARGV[base + 5] == 'f'
  local first = base + 6
  -- First pass, reads only: which items a dedup key holder absorbs (an older
  -- item, or the first item of this batch with the key), and how many are new.
  local holder, first_of, fresh = {}, {}, n
  if not plain then
    fresh = 0
    for i = 0, n - 1 do
      local dk = ARGV[first + i * 6 + 4]
      if dk ~= '' and first_of[dk] then
        holder[i] = -first_of[dk] - 1
      else
        if dk ~= '' then
          local hid = redis.call('HGET', K_DEDUP, dk)
          if hid and redis.call('HEXISTS', K_ITEMS, hid) == 1 then holder[i] = tonumber(hid) end
          if not holder[i] then holder[i] = held_by(dk, now) end
        end
        if not holder[i] then
          fresh = fresh + 1
          if dk ~= '' then first_of[dk] = i end
        end
      end
    end
  end
  local new, note, new_s = {}, nil, nil
  local fifo_ok = true
  if fresh > 0 then
    local listed = redis.call('EXISTS', K_LISTED) == 1
    local gen = unregistered(listed, token, ARGV[base + 1])
    if gen then return { unregistered = gen } end
    local err
    local run, ran = replication_id(), redis.call('GET', K_RUN)
    new, err, new_s = new_ids(fresh, floor, start, run, ran)
    if not new then return redis.error_reply(err) end
    note = err
    -- The fifo must stay in id order: new ids below its last entry (a
    -- counter set back below a lost id) go to the ranked index.
    local tail = tonumber(redis.call('LINDEX', K_FIFO, -1))
    fifo_ok = not tail or tail < new[1]
    if not fifo_ok then
      local bad = guard(K_READY)
      if bad then return bad end
    end
    -- The first write.
    if not listed then redis.call('SET', K_LISTED, token) end
    local hi = fmt_int(new[fresh])
    if run and ran ~= run then
      redis.call('MSET', K_SEQ, hi, K_MARK, hi, K_RUN, run)
    else
      redis.call('MSET', K_SEQ, hi, K_MARK, hi)
    end
  end
  local out, ids, recs, fifo, ranked, sched, dks, ufs, dedup = {}, {}, {}, {}, {}, {}, {}, {}, {}
  local readied = 0
  if plain then
    -- In the fifo: the new ids as the free-id check spelled them, in order.
    if fifo_ok and new_s then fifo = new_s end
    for i = 1, n do
      recs[2 * i - 1], recs[2 * i] = new_s[i], pre .. ARGV[first + i - 1]
      if not fifo_ok then ranked[2 * i - 1], ranked[2 * i] = '0', member(new[i]) end
    end
    out, readied = new, n
  end
  local used = 0
  for i = 0, plain and -1 or n - 1 do
    local b = first + i * 6
    local h = holder[i]
    if h and h >= 0 then
      out[#out + 1] = -h
    elseif h then
      out[#out + 1] = -ids[-h - 1]
    else
      -- Priority and max attempts go on as the client sent them (decimal
      -- integers); Lua numbers would be formatted as floats on every call.
      -- The delay is compared as text first: no number conversion for the
      -- usual item without one.
      local payload, pri, delay, maxa, dk = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
      used = used + 1
      local id = new[used]
      local id_s = new_s[used]
      ids[i] = id
      recs[#recs + 1] = id_s
      recs[#recs + 1] = pre .. maxa .. ',' .. pri .. ',' .. payload
      if delay ~= '0' then
        sched[#sched + 1] = fmt_int(now + tonumber(delay))
        sched[#sched + 1] = member(id)
      else
        if pri == '0' and fifo_ok then
          fifo[#fifo + 1] = id_s
        else
          ranked[#ranked + 1] = neg(pri)
          ranked[#ranked + 1] = member(id)
        end
        readied = readied + 1
      end
      if dk ~= '' then
        dks[#dks + 1] = id_s
        dks[#dks + 1] = dk
        dedup[#dedup + 1] = dk
        dedup[#dedup + 1] = id_s
        if ARGV[b + 5] ~= '0' then
          ufs[#ufs + 1] = id_s
          ufs[#ufs + 1] = ARGV[b + 5]
        end
      end
      out[#out + 1] = id
    end
  end
  hset_wide(K_ITEMS, recs)
  if #fifo > 0 then call_chunked('RPUSH', K_FIFO, fifo) end
  zadd_batch(K_READY, ranked)
  zadd_batch(K_SCHED, sched)
  if #dks > 0 then
    call_chunked('HSET', K_DK, dks)
    call_chunked('HSET', K_DEDUP, dedup)
  end
  if #ufs > 0 then call_chunked('HSET', K_UF, ufs) end
  notify(readied)
  -- The new ids, in order; a deduplicated item made nothing.
  if fresh > 0 and ev() then
    for i = 1, fresh do ev('enqueued', new_s[i]) end
    ev_flush()
  end
  return out, note
end
