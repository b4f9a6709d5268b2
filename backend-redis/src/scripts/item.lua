-- item: ARGV[2] = id. Returns { record, repairs }, or 0 when there is no
-- item. An item whose fields are outside the limits (see `unusable`) is
-- quarantined as a claim would do it (see `inspect_poison`) and shown as
-- Dead; when an index key has the wrong type it is only shown, not moved.
local id = tonumber(ARGV[2])
local k = item_key(id)
if key_type(k) ~= 'hash' then return 0 end
local repairs = {}
local rec, problem, home = item_record(id, k, now_ms())
if problem then
  if guard_indexes() then
    add_repair(repairs, home, id, 'unusable fields (' .. problem .. '); an index key is corrupt, not moved')
  else
    inspect_poison(rec, problem, home, repairs)
  end
end
return { rec, repairs }
