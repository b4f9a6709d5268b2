-- Deletes up to `batch` entries of each index (a lease group counts as one)
-- and their items. Returns how many items it deleted and how many entries
-- the indexes still hold. Once they hold none, records in no index (left by
-- corruption) go with the hashes that hold a field per item.
local function purge_batch(batch)
  local ids = redis.call('LPOP', K_FIFO, batch) or {}
  for _, key in ipairs({ K_READY, K_SCHED, K_DEAD }) do
    local ms = redis.call('ZRANGE', key, 0, batch - 1)
    call_chunked('ZREM', key, ms)
    for _, m in ipairs(ms) do
      local id = member_id(m)
      if id then ids[#ids + 1] = fmt_int(id) end
    end
  end
  for _, g in ipairs(redis.call('ZRANGE', K_GROUPS, 0, batch - 1)) do
    for _, id_s in ipairs(group_ids(g)) do ids[#ids + 1] = id_s end
    redis.call('ZREM', K_GROUPS, g)
    redis.call('HDEL', K_GIDS, g)
    redis.call('HDEL', K_GLIVE, g)
  end
  local deleted = call_chunked('HDEL', K_ITEMS, ids)
  for _, k in ipairs({ K_TOK, K_MOVED, K_ATT, K_ERR, K_DK, K_UF, K_CANCEL, K_PROG }) do call_chunked('HDEL', k, ids) end
  local left = redis.call('LLEN', K_FIFO) + redis.call('ZCARD', K_READY) + redis.call('ZCARD', K_SCHED)
    + redis.call('ZCARD', K_DEAD) + redis.call('ZCARD', K_GROUPS)
  if left == 0 then
    deleted = deleted + item_count()
    redis.call('DEL', K_ITEMS, K_TOK, K_GIDS, K_GLIVE, K_MOVED, K_ATT, K_ERR, K_DK, K_UF, K_CANCEL, K_PROG, K_DEAD_AT)
  end
  return deleted, left
end
