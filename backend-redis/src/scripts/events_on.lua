-- events_on: ARGV[2] = for how long (ms). Sets `events:on`, so that every
-- script tells this queue's job events (see `ev` in common.lua) until it
-- expires, and answers the id of the `events` stream's last entry ('0-0'
-- when there is none): a subscriber reads on from there, so it gets the
-- events of every call that runs after this one. A subscribed process
-- calls it again before the expiry (src/events.rs).
redis.call('SET', QUEUE_TAG .. 'events:on', '1', 'PX', ARGV[2])
local last = redis.pcall('XREVRANGE', QUEUE_TAG .. 'events', '+', '-', 'COUNT', 1)
if type(last) == 'table' and last[1] then return last[1][1] end
return '0-0'
