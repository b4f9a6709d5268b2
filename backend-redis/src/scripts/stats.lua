-- stats: K_EXTRA = the queue's limits hash. Counts per state, 1 when the
-- queue is paused (leaseq_core::Control::pause) else 0, and the completion
-- counter (0 when absent, or not a number: the next ack starts it again).
-- Due Scheduled items are promoted (one bounded batch) and any left over
-- still count as Ready.
local bad = guard_all()
if bad then return bad end
local now = now_ms()
promote_due(now, {})
ev_flush()
local due = redis.call('ZCOUNT', K_SCHED, '-inf', now)
return { redis.call('LLEN', K_FIFO) + redis.call('ZCARD', K_READY) + due,
         redis.call('ZCOUNT', K_SCHED, '(' .. fmt_int(now), '+inf'), leased_count(), redis.call('ZCARD', K_DEAD),
         paused_flag(), int_field(redis.pcall('GET', K_COMPLETED), 0, ID_MAX) or 0 }
