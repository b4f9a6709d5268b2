-- schedule_fire: K_EXTRA = the schedule's record (a hash in the queue's
-- slot: name, spec, p payload, rev, def, last). ARGV[2] = the revision the
-- caller loaded, ARGV[3] = the tick (ms), then from ARGV[4] the enqueue
-- batch arguments of one item (scripts/enqueue_batch.lua).
-- Returns { 'stale' } | { 'done', last } | { 'early', now } |
-- { 'fired', rows, note } | { 'unregistered', generation } (the queue must
-- be registered first, nothing written, as `enqueue` answers). The check of the last tick, the enqueue and the
-- record of the tick are this one script: one step.
local K_REC = K_EXTRA
local t = key_type(K_REC)
if t == 'none' then return { 'stale' } end
if t ~= 'hash' then
  return redis.error_reply('LEASEQ_CORRUPT key ' .. K_REC .. ' holds a ' .. t .. ', expected a hash')
end
local f = redis.call('HMGET', K_REC, 'rev', 'last')
if f[1] ~= ARGV[2] then return { 'stale' } end
local tick = tonumber(ARGV[3])
local last = tonumber(f[2])
if last and last >= tick then return { 'done', f[2] } end
local now = now_ms()
if tick > now then return { 'early', fmt_int(now) } end
local out, note = enqueue_batch(4)
if out.err then return out end
if out.unregistered then return { 'unregistered', out.unregistered } end
redis.call('HSET', K_REC, 'last', ARGV[3])
return { 'fired', out, note or false }
