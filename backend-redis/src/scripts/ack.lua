-- ack: ARGV[2] = id, ARGV[3] = token. Returns 1, or 0 when the lease is lost.
local id = tonumber(ARGV[2])
local k = fenced(id, ARGV[3])
if not k then return 0 end
remove_item(id, member(id), k)
return 1
