-- purge: ARGV[2] = batch size. Deletes up to a batch of entries per index and
-- their items; when every index is empty, the dedup keys (held ones too)
-- and the kept finished items. The limits hash, and with it a pause
-- (leaseq_core::Control::pause), stays, as does the retention policy.
-- Returns { items deleted, more }.
local bad = guard_all()
if bad then return bad end
local deleted, left = purge_batch(tonumber(ARGV[2]))
local more = 1
if left == 0 then
  redis.call('DEL', K_DEDUP, K_NOTIFY, K_HELD, K_HELD_ID)
  -- The kept finished items go too (UNLINK: freed off the main thread);
  -- the retention policy stays.
  redis.call('UNLINK', K_DONE, K_DONE .. ':completed', K_DONE .. ':cancelled')
  more = 0
end
return { deleted, more }
