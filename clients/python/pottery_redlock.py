"""lockcheck adapter for pottery's Redlock (SET NX PX on every master, a majority within the
validity time; no fencing; extend() only when the caller calls it, which this adapter does
not, as a plain `with lock:` user would not)."""
import os

from lockcheck_protocol import env_ms, require, serve

redis = require("redis", "redis")
Redlock = require("pottery", "pottery").Redlock
ReleaseUnlockedLock = require("pottery.exceptions", "pottery").ReleaseUnlockedLock

timeout = env_ms("LOCKCHECK_REQUEST_TIMEOUT_MS")
masters = {redis.Redis.from_url(u, socket_timeout=timeout, socket_connect_timeout=timeout)
           for u in os.environ["LOCKCHECK_REDIS_URLS"].split(",")}
# pottery writes its entries under "redlock:<key>" (`Redlock._KEY_PREFIX`). The scenario names the
# key the servers hold (`[lock] key = "redlock:..."`), which lockcheck's witness watches; pottery
# is given the rest.
PREFIX = "redlock:"
key = os.environ["LOCKCHECK_KEY"]
if not key.startswith(PREFIX):
    raise SystemExit(f"pottery_redlock.py: [lock] key must start with {PREFIX!r} (pottery's "
                     f"prefix), got {key!r}")
lock = Redlock(key=key[len(PREFIX):], masters=masters,
               auto_release_time=env_ms("LOCKCHECK_TTL_MS"))


def acquire():
    return {} if lock.acquire(timeout=env_ms("LOCKCHECK_WAIT_MS")) else None


def release():
    try:
        lock.release()
        return True
    except ReleaseUnlockedLock:
        return False


serve(acquire, release)
