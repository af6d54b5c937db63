"""lockcheck adapter for redis-py's Lock (SET NX PX + Lua compare-and-delete, no fencing,
no automatic extension). With LOCKCHECK_SENTINELS set (a Sentinel run) it finds the master
through redis-py's Sentinel client, as an application under Redis Sentinel does; with
LOCKCHECK_REDIS_CLUSTER_NODES set (a Redis Cluster run) it is handed the cluster's seed nodes
and uses redis-py's RedisCluster, which routes the lock key to its slot's master and follows
MOVED and ASK, as an application on a cluster does."""
import os
import sys

from lockcheck_protocol import env_ms, require, serve

redis = require("redis", "redis")
LockNotOwnedError = require("redis.exceptions", "redis").LockNotOwnedError
Sentinel = require("redis.sentinel", "redis").Sentinel
cluster = require("redis.cluster", "redis")
ClusterDownError = require("redis.exceptions", "redis").ClusterDownError

timeout = env_ms("LOCKCHECK_REQUEST_TIMEOUT_MS")
if os.environ.get("LOCKCHECK_SENTINELS"):
    sentinels = [(h, int(p)) for h, p in
                 (a.rsplit(":", 1) for a in os.environ["LOCKCHECK_SENTINELS"].split(","))]
    r = Sentinel(sentinels, socket_timeout=timeout, socket_connect_timeout=timeout).master_for(
        os.environ["LOCKCHECK_SENTINEL_MASTERS"].split(",")[0],
        socket_timeout=timeout, socket_connect_timeout=timeout)
elif os.environ.get("LOCKCHECK_REDIS_CLUSTER_NODES"):
    r = cluster.RedisCluster(
        startup_nodes=[cluster.ClusterNode(h, int(p)) for h, p in
                       (a.rsplit(":", 1) for a in
                        os.environ["LOCKCHECK_REDIS_CLUSTER_NODES"].split(","))],
        socket_timeout=timeout, socket_connect_timeout=timeout)
else:
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
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
            ClusterDownError) as e:
        # The compare-and-delete may have run and its reply been lost: not known either way.
        print("release outcome unknown: %s" % e, file=sys.stderr)
        return None


serve(acquire, release)
