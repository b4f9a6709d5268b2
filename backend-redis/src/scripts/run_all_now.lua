-- run_all_now: ARGV[2] = batch size (leaseq_core::Control::run_all_now).
-- Moves up to a batch of the Scheduled items not yet due, earliest due
-- first, to Ready (see `promote_due`); due ones are promoted first, as every
-- claim does, and not counted. Returns { moved, entries taken, repairs }:
-- fewer entries than the batch means none is left.
local bad = guard_all()
if bad then return bad end
local now = now_ms()
local repairs = {}
promote_due(now, repairs)
local ms = redis.call('ZRANGEBYSCORE', K_SCHED, '(' .. fmt_int(now), '+inf', 'LIMIT', 0, tonumber(ARGV[2]))
local moved = promote_due(now, repairs, ms)
ev_flush()
return { moved, #ms, repairs }
