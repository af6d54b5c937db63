-- Redisson RLock acquire (the Redisson article, tryLockInnerAsync). The lock is a hash whose one field is the
-- holder (client uuid:thread id) and whose value is its hold count.
-- KEYS[1] = lock key, ARGV[1] = lease in ms, ARGV[2] = holder field.
-- Free, or already ours (reentrant): count + 1, lease reset, nil. Otherwise: the PTTL to wait.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
