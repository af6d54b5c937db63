-- Redisson RLock release (unlockInnerAsync): count down; at zero delete the lock and publish the
-- unlock message that wakes the waiters.
-- KEYS[1] = lock key, KEYS[2] = the lock's channel
-- ARGV[1] = unlock message, ARGV[2] = lease in ms, ARGV[3] = holder field
-- Returns nil if not ours, 0 if still held (count > 0, lease reset), 1 if deleted.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
