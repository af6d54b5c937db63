-- Fenced acquire (Kleppmann, "How to do distributed locking"): take the lock and, in the same
-- atomic step, a fencing token from a counter on the same Redis. The token increases with every
-- grant, so the storage can refuse a write from a holder whose lease was superseded.
-- KEYS[1] = lock key, KEYS[2] = fencing counter key; ARGV[1] = owner token, ARGV[2] = lease in ms.
-- Returns the fencing token when acquired, nil when the lock is held.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('incr', KEYS[2])
end
return nil
