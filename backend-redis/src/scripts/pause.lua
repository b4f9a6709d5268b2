-- pause: K_EXTRA = the queue's limits hash (scripts/limits.lua), where the
-- pause is the field `paused` (leaseq_core::Control::pause). ARGV[2] =
-- 'pause', 'resume' or 'get'. A resume that ends a pause wakes idle
-- workers as an enqueue of the queue's Ready items would. Returns 1 when
-- the queue is paused (after the call), else 0.
local mode = ARGV[2]
if mode == 'pause' then
  paused_flag() -- refuses a limits key of the wrong type
  redis.call('HSET', K_LIMITS, 'paused', '1')
  return 1
end
if mode == 'resume' and paused_flag() == 1 then
  local ready = redis.call('LLEN', K_FIFO) + redis.call('ZCARD', K_READY)
    + redis.call('ZCOUNT', K_SCHED, '-inf', now_ms())
  redis.call('HDEL', K_LIMITS, 'paused')
  notify(ready)
  return 0
end
return paused_flag()
