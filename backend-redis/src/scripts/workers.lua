-- workers: the registry of live workers (leaseq_core::WorkerRegistry), one
-- per prefix, in the slot of the `_` pseudo queue (src/registry.rs).
-- K_EXTRA (KEYS[2]) = a hash, worker id -> its entry (the JSON of
-- leaseq_core::WorkerEntry::encode); KEYS[3] = a sorted set, worker id ->
-- when its entry expires (ms, on the server's clock). ARGV[2] is the call:
-- - 'register', ARGV[3] = id, ARGV[4] = ttl ms, ARGV[5] = the entry:
--   writes it to expire ttl after now; returns that expiry;
-- - 'deregister', ARGV[3] = id: deletes it; returns 1 when it was live;
-- - 'list': returns { ids, expiries, entries } of the live entries.
-- Each call first deletes up to PRUNE entries that expired: the cost of
-- every call grows with the number of workers, never with jobs or items.
-- It carries no script flags: over `maxmemory` a registration is refused
-- (OOM) at its write, while a list or a deregistration (deletes only) runs.
local PRUNE = 1000
local K_WORKERS, K_WEXP = K_EXTRA, KEYS[3]
local bad = guard_types({ { K_WORKERS, 'hash' }, { K_WEXP, 'zset' } })
if bad then return bad end
local now = now_ms()
local gone = redis.call('ZRANGEBYSCORE', K_WEXP, '-inf', now, 'LIMIT', 0, PRUNE)
if #gone > 0 then
  call_chunked('ZREM', K_WEXP, gone)
  call_chunked('HDEL', K_WORKERS, gone)
end
local call, id = ARGV[2], ARGV[3]
if call == 'register' then
  local exp = now + tonumber(ARGV[4])
  redis.call('HSET', K_WORKERS, id, ARGV[5])
  redis.call('ZADD', K_WEXP, exp, id)
  return exp
end
if call == 'deregister' then
  local live = redis.call('ZSCORE', K_WEXP, id) and redis.call('HEXISTS', K_WORKERS, id) == 1
  redis.call('ZREM', K_WEXP, id)
  redis.call('HDEL', K_WORKERS, id)
  if live then return 1 end
  return 0
end
local page = redis.call('ZRANGEBYSCORE', K_WEXP, '(' .. fmt_int(now), '+inf', 'WITHSCORES')
local ids, exps = {}, {}
for i = 1, #page - 1, 2 do
  ids[#ids + 1] = page[i]
  exps[#exps + 1] = tonumber(page[i + 1])
end
return { ids, exps, read_chunked('HMGET', K_WORKERS, ids) }
