-- Lettuce unlock (the Lettuce article): delete the key only if it still holds our value.
-- KEYS[1] = lock key, ARGV[1] = the holder's value. Returns 1 if deleted, nil otherwise.
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    return 1
end
return nil
