-- test hook: ARGV[2] = id. Puts an entry for it at the head of Ready, without an item.
redis.call('ZADD', K_READY, '-inf', member(tonumber(ARGV[2])))
return 1
