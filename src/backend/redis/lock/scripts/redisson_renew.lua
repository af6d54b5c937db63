-- Redisson watchdog renewal (the Redisson article, renewExpirationAsync): extend the lease only while the
-- holder's field is still in the hash.
-- KEYS[1] = lock key, ARGV[1] = lease in ms, ARGV[2] = holder field. Returns 1 renewed, 0 not ours.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
