-- schedule_get: K_EXTRA = the schedule's record; ARGV[2] = 1 to delete it
-- after reading (a removal, or the first half of a move to another queue).
-- Returns { spec, payload, revision, defined at, last tick ('' = none) },
-- or false when there is no record.
local K_REC = K_EXTRA
if key_type(K_REC) ~= 'hash' then return false end
local f = redis.call('HMGET', K_REC, 'spec', 'p', 'rev', 'def', 'last')
if ARGV[2] == '1' then redis.call('DEL', K_REC) end
if not f[3] then return false end
return { f[1] or '', f[2] or '', f[3], f[4] or '0', f[5] or '' }
