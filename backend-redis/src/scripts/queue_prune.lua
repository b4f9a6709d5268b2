-- queue_prune: how many items the queue holds (the entries of its four
-- indexes, what `stats` counts). When it holds none it leaves the listing
-- here: `listed` is deleted and the prune generation raised, so a
-- registration made before this prune no longer lets an enqueue in (see
-- src/listing.rs). Returns the count.
local bad = guard(K_READY, K_SCHED, K_LEASED, K_DEAD)
if bad then return bad end
local n = redis.call('ZCARD', K_READY) + redis.call('ZCARD', K_SCHED)
  + redis.call('ZCARD', K_LEASED) + redis.call('ZCARD', K_DEAD)
if n == 0 then
  redis.call('DEL', K_LISTED)
  redis.call('INCR', K_LISTGEN)
end
return n
