-- queue_prune: how many items the queue holds (its records). When it holds none it leaves the listing
-- here: `listed` is deleted and the prune generation raised, so a
-- registration made before this prune no longer lets an enqueue in (see
-- src/listing.rs). Returns the count.
local bad = guard(K_ITEMS)
if bad then return bad end
local n = item_count()
if n == 0 then
  redis.call('DEL', K_LISTED)
  redis.call('INCR', K_LISTGEN)
end
return n
