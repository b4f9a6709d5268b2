-- leaseq: global queue limits, the part of the claim script that reads and
-- counts them (prepended to claim.lua at build time).
-- K_EXTRA (KEYS[2]): the queue's limits hash: `conc` (at most this many Leased),
-- `rate` and `per` (at most `rate` items leased per window of `per` ms),
-- `win` and `used` (the current window's start in ms and the items leased
-- in it), and `paused` (present while the queue is paused,
-- leaseq_core::Control::pause: read with the limits, so a claim pays
-- nothing for it, and a queue neither limited nor paused has no key at
-- all). Windows are fixed: window i covers [i * per, (i + 1) * per) ms
-- of the server's clock. The arithmetic is leaseq_core::queue_limits::
-- Admission's, step for step.
-- leaseq_core::queue_limits::CONCURRENCY_RETRY in ms (a unit test keeps the
-- two equal).
local CONCURRENCY_RETRY_MS = 100
local LIMIT_MAX = 2147483647
local WINDOW_MAX_MS = 86400000
local LIM = nil

-- How many items a claim of up to `max` at `now` may lease under the
-- queue's limits; (nil, error reply) when the limits key is not a hash;
-- (0, nil, true) when the queue is paused.
-- Every Leased item counts (expired ones not yet reaped included): the
-- token index's HLEN, one O(1) read.
local function limits_admit(now, max)
  if not K_LIMITS then return max end
  local t = key_type(K_LIMITS)
  if t == 'none' then return max end
  if t ~= 'hash' then
    return nil, redis.error_reply('LEASEQ_CORRUPT key ' .. K_LIMITS .. ' holds a ' .. t .. ', expected a hash')
  end
  local f = redis.call('HMGET', K_LIMITS, 'conc', 'rate', 'per', 'win', 'used', 'paused')
  if f[6] then return 0, nil, true end
  local conc = int_field(f[1], 1, LIMIT_MAX)
  local rate, per = int_field(f[2], 1, LIMIT_MAX), int_field(f[3], 1, WINDOW_MAX_MS)
  local allow, conc_left, rate_left = max, nil, nil
  if conc then
    conc_left = math.max(conc - leased_count(), 0)
    allow = math.min(allow, conc_left)
  end
  local start, used = nil, 0
  if rate and per then
    start = now - (now % per)
    if int_field(f[4], 0, ID_MAX) == start then used = int_field(f[5], 0, ID_MAX) or 0 end
    rate_left = math.max(rate - used, 0)
    allow = math.min(allow, rate_left)
  end
  LIM = { max = max, allow = allow, conc_left = conc_left, rate_left = rate_left,
          start = start, used = used, per = per, now = now }
  return allow
end

-- After the claim leased `got` items: counts them in the rate window and
-- returns how long to wait (ms) when a limit cut the claim short (it leased
-- all it was allowed, fewer than asked), else false.
local function limits_done(got)
  if not LIM then return false end
  if LIM.start then
    redis.call('HSET', K_LIMITS, 'win', fmt_int(LIM.start), 'used', fmt_int(LIM.used + got))
  end
  if LIM.allow >= LIM.max or got < LIM.allow then return false end
  local wait = false
  if LIM.conc_left == LIM.allow then wait = CONCURRENCY_RETRY_MS end
  if LIM.start and LIM.rate_left == LIM.allow then
    local left = math.max(LIM.start + LIM.per - LIM.now, 1)
    if not wait or left > wait then wait = left end
  end
  return wait
end
