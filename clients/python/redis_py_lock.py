"""lockcheck adapter for redis-py's Lock (SET NX PX + Lua compare-and-delete, no fencing,
no automatic extension)."""
import os

import redis
from redis.exceptions import LockNotOwnedError

from lockcheck_protocol import env_ms, serve

timeout = env_ms("LOCKCHECK_REQUEST_TIMEOUT_MS")
r = redis.Redis.from_url(os.environ["LOCKCHECK_REDIS_URLS"].split(",")[0],
                         socket_timeout=timeout, socket_connect_timeout=timeout)
lock = r.lock(os.environ["LOCKCHECK_KEY"], timeout=env_ms("LOCKCHECK_TTL_MS"),
              sleep=int(os.environ["LOCKCHECK_RETRY_MS"].split(",")[0]) / 1000.0,
              blocking_timeout=env_ms("LOCKCHECK_WAIT_MS"))


def acquire():
    return {} if lock.acquire() else None


def release():
    try:
        lock.release()
        return True
    except LockNotOwnedError:
        return False


serve(acquire, release)
