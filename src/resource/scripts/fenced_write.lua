-- The storage's write: set the counter, refusing a write whose fencing token is older than the
-- highest token this storage has seen (Kleppmann's fencing check, done by the resource).
-- KEYS[1] = value key, KEYS[2] = highest-token key, KEYS[3] = write-sequence key
-- ARGV[1] = new value, ARGV[2] = fencing token, or '' for a write without one
-- Returns the write's sequence number (1, 2, ...) if accepted, 0 if refused.
local token = ARGV[2]
if token ~= '' then
    local highest = redis.call('get', KEYS[2])
    if highest and tonumber(token) < tonumber(highest) then
        return 0
    end
    redis.call('set', KEYS[2], token)
end
redis.call('set', KEYS[1], ARGV[1])
return redis.call('incr', KEYS[3])
