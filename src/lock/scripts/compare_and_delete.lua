-- Release: delete the lock only if it still holds our owner token.
-- GET and DEL in one script, so no other client's SET can slip in between (the Redlock article).
-- KEYS[1] = lock key, ARGV[1] = owner token. Returns 1 if deleted, 0 if not ours (or gone).
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
else
    return 0
end
