//! Sets and sorted sets against the real server: replies, errors, WRONGTYPE, expiry, and the
//! fair-lock script shape (the Redisson article) that keeps waiter timeouts in a sorted set.

use super::Diff;

#[test]
fn sets_and_sorted_sets() {
    let mut d = Diff::new();
    let cmds: &[&[&str]] = &[
        &["sadd", "s", "3", "1", "2", "1"],
        &["sadd", "s"],
        &["smembers", "s"],
        &["srem", "s", "9", "1"],
        &["sismember", "s", "2"],
        &["sismember", "s", "1"],
        &["scard", "s"],
        &["scard", "nope"],
        &["smembers", "nope"],
        &["srem", "nope", "a"],
        &["srem", "s", "2", "3"],
        &["exists", "s"],
        &["sadd", "one", "x"],
        &["smembers", "one"],
        &["type", "one"],
        &["set", "str", "v"],
        &["sadd", "str", "a"],
        &["sismember", "str", "a"],
        &["smembers", "str"],
        &["zadd", "str", "1", "a"],
        &["zscore", "str", "a"],
        &["zrange", "str", "0", "-1"],
        &["zadd", "z", "1", "a", "2", "b"],
        &["type", "z"],
        &["zadd", "z", "xx", "nx", "1", "a"],
        &["zadd", "z", "gt", "lt", "1", "a"],
        &["zadd", "z", "nx", "gt", "1", "a"],
        &["zadd", "z", "incr", "1", "a", "2", "b"],
        &["zadd", "z", "1"],
        &["zadd", "z", "1", "a", "2"],
        &["zadd", "z", "abc", "a"],
        &["zadd", "z", "nan", "a"],
        &["zadd", "z", "1e400", "a"],
        &["zadd", "z", " 5", "a"],
        &["zadd", "z", "INCR", "1.5", "a"],
        &["zadd", "z", "nx", "incr", "1", "a"],
        &["zadd", "z", "xx", "incr", "1", "new"],
        &["zadd", "z", "gt", "incr", "-1", "a"],
        &["zadd", "z", "ch", "gt", "0", "a", "5", "b", "1", "c"],
        &["zadd", "z", "lt", "ch", "9", "a", "4", "b"],
        &["zadd", "z", "xx", "1", "nope"],
        &["zadd", "zx", "xx", "1", "a"],
        &["zadd", "zx", "xx", "incr", "1", "a"],
        &["exists", "zx"],
        &["zadd", "z", "0.1", "d", "inf", "e", "0x10", "f", "1e3", "g"],
        &["zadd", "z", "-inf", "e"],
        &["zadd", "z", "incr", "inf", "e"],
        &["zadd", "z", "incr", "-inf", "e"],
        &["zscore", "z", "d"],
        &["zscore", "z", "e"],
        &["zscore", "z", "nope"],
        &["zscore", "nope", "a"],
        &["zrange", "z", "0", "-1", "withscores"],
        &["zrange", "z", "0", "-1", "WITHSCORES", "withscores"],
        &["zrange", "z", "1", "2"],
        &["zrange", "z", "-2", "100"],
        &["zrange", "z", "5", "1"],
        &["zrange", "z", "0", "-1", "rev"],
        &["zrange", "z", "0", "1", "rev", "withscores"],
        &["zrange", "z", "-inf", "+inf", "byscore", "withscores"],
        &["zrange", "z", "(0", "5", "byscore", "limit", "1", "2"],
        &["zrange", "z", "+inf", "-inf", "byscore", "rev"],
        &["zrange", "z", "0", "1", "byscore", "rev"],
        &["zrange", "z", "(1", "(", "byscore", "rev"],
        &["zrange", "z", "0", "-1", "limit", "0", "1"],
        &["zrange", "z", "a", "b", "byscore"],
        &["zrange", "z", "a", "b"],
        &["zrange", "z", "0", "-1", "foo"],
        &["zrange", "z", "0", "-1", "byscore", "limit", "x", "1"],
        &["zrange", "z", "-inf", "inf", "byscore", "limit", "-1", "1"],
        &["zrange", "z", "-inf", "inf", "byscore", "limit", "1", "-1"],
        &["zrange", "z", "-inf", "inf", "byscore", "limit", "1", "0"],
        &["zrange", "z", "0"],
        &["zrange", "nope", "0", "-1"],
        &[
            "zrangebyscore",
            "z",
            "-inf",
            "+inf",
            "withscores",
            "limit",
            "0",
            "2",
        ],
        &["zrangebyscore", "z", "x", "1"],
        &["zrangebyscore", "z", "(1", "(1000"],
        &["zrangebyscore", "z", "1", "1000", "rev"],
        &["zrangebyscore", "z", "2", "1"],
        &["zremrangebyscore", "z", "5", "inf"],
        &["zremrangebyscore", "z", "x", "inf"],
        &["zremrangebyscore", "nope", "0", "1"],
        &["zrem", "z", "d", "nope"],
        &["zrem", "nope", "d"],
        &["zcard", "z"],
        &["zincrby", "z", "2", "c"],
        &["zincrby", "z", "x", "c"],
        &["zincrby", "str", "1", "c"],
        &["lpush", "l", "a", "b"],
        &["lindex", "l", "0"],
        &["lindex", "l", "-1"],
        &["lindex", "l", "-3"],
        &["lindex", "l", "5"],
        &["lindex", "l", "x"],
        &["lindex", "z", "0"],
        &["zcard", "nope"],
        &["zrange", "z", "0", "-1", "withscores"],
        &["zremrangebyscore", "z", "-inf", "+inf"],
        &["exists", "z"],
        &["zadd", "t", "1", "a"],
        &["pexpire", "t", "1"],
        &["sadd", "u", "a"],
        &["pexpire", "u", "1"],
    ];
    for c in cmds {
        d.same(c);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    for c in [
        &["zcard", "t"][..],
        &["zscore", "t", "a"],
        &["scard", "u"],
        &["exists", "t", "u"],
    ] {
        d.same(c);
    }
    d.finish();
}

#[test]
fn fair_lock_script_on_a_sorted_set() {
    // The fair lock's shape (the Redisson article): a queue list and a timeout sorted set;
    // stale waiters are dropped, the head may take the lock, others queue with a timeout.
    const ACQUIRE: &str = "
        while true do
            local first = redis.call('lindex', KEYS[2], 0)
            if first == false then break end
            local timeout = tonumber(redis.call('zscore', KEYS[3], first))
            if timeout <= tonumber(ARGV[4]) then
                redis.call('zrem', KEYS[3], first)
                redis.call('lpop', KEYS[2])
            else break end
        end
        if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0)
                or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
            redis.call('lpop', KEYS[2])
            redis.call('zrem', KEYS[3], ARGV[2])
            local keys = redis.call('zrange', KEYS[3], 0, -1)
            for i = 1, #keys, 1 do
                redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i])
            end
            redis.call('hset', KEYS[1], ARGV[2], 1)
            redis.call('pexpire', KEYS[1], ARGV[1])
            return nil
        end
        local timeout = redis.call('zscore', KEYS[3], ARGV[2])
        if timeout ~= false then
            return timeout - tonumber(ARGV[3]) - tonumber(ARGV[4])
        end
        local lastThreadId = redis.call('lindex', KEYS[2], -1)
        local ttl
        if lastThreadId ~= false and lastThreadId ~= ARGV[2] then
            ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4])
        else
            ttl = redis.call('pttl', KEYS[1])
        end
        local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
        if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then
            redis.call('rpush', KEYS[2], ARGV[2])
        end
        return ttl";
    let mut d = Diff::new();
    let keys = [
        "flock",
        "redisson_lock_queue:{flock}",
        "redisson_lock_timeout:{flock}",
    ];
    for (who, now) in [("a", "1000"), ("b", "1001"), ("c", "1002"), ("b", "1003")] {
        // The answer is a PTTL plus constants: time-dependent, compared with a tolerance.
        let mut eval = vec!["EVAL", ACQUIRE, "3"];
        eval.extend_from_slice(&keys);
        eval.extend_from_slice(&["30000", who, "5000", now]);
        d.close(&eval, 50);
    }
    d.same(&["zrange", keys[2], "0", "-1"]);
    d.same(&["lrange", keys[1], "0", "-1"]);
    d.same(&["hgetall", keys[0]]);
    // Every waiter's timeout has passed by now: the queue is cleaned before the next attempt.
    d.same(&["del", keys[0]]);
    d.eval(ACQUIRE, &keys, &["30000", "d", "5000", "999999999999"]);
    d.same(&["zcard", keys[2]]);
    d.same(&["llen", keys[1]]);
    d.same(&["hgetall", keys[0]]);
    d.finish();
}
