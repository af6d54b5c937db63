-- Renew: extend the lease only if the lock still holds our owner token.
-- GET and PEXPIRE in one script: a plain PEXPIRE would extend whoever holds the key now, and a
-- holder whose lease ran out would go on believing it holds the lock another client was granted.
-- KEYS[1] = lock key, ARGV[1] = owner token, ARGV[2] = lease in ms.
-- Returns 1 if extended, 0 if not ours (or gone).
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
else
    return 0
end
