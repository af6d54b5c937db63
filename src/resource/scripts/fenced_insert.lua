-- The address book's insert (the address-book article): add one address row for a user, with the same fencing
-- check as a counter write.
-- KEYS[1] = the user's address hash, KEYS[2] = highest-token key, KEYS[3] = write-sequence key
-- ARGV[1] = address id, ARGV[2] = is_default ('1' or '0'), ARGV[3] = fencing token or ''
-- Returns the write's sequence number if accepted, 0 if refused.
local token = ARGV[3]
if token ~= '' then
    local highest = redis.call('get', KEYS[2])
    if highest and tonumber(token) < tonumber(highest) then
        return 0
    end
    redis.call('set', KEYS[2], token)
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
return redis.call('incr', KEYS[3])
