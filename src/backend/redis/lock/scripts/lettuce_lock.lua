-- Lettuce lock (the Lettuce article): SETNX, and on success PEXPIRE, in one script so the two cannot be
-- separated by a crash. Loaded once with SCRIPT LOAD and run by EVALSHA.
-- KEYS[1] = lock key, ARGV[1] = lease in ms, ARGV[2] = the holder's value.
-- Returns nil when acquired, else the remaining lease (PTTL) of the current holder.
if redis.call('setnx', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], tonumber(ARGV[1]))
    return nil
end
return redis.call('pttl', KEYS[1])
