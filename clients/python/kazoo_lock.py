"""lockcheck adapter for kazoo's Lock (ZooKeeper's lock recipe: an ephemeral sequential znode
under the lock's path; the lowest sequence holds the lock, every other contender watches its
predecessor). The node lives as long as the client's session, which is the lock's lease: the
session timeout is LOCKCHECK_SESSION_TIMEOUT_MS. Once acquired, kazoo's Lock does not look at its
session again (its connection listener runs only while it waits), and its release() answers True
even when the node was already gone (it ignores NoNodeError).

Token: the lock node's sequence number, which ZooKeeper takes from the lock path's counter of
children created, so a later grant has a higher one: ZooKeeper's own fencing token (kazoo exposes
the node's name as Lock.node)."""
import os
import sys

from lockcheck_protocol import env_ms, require, serve

KazooClient = require("kazoo.client", "kazoo").KazooClient
LockTimeout = require("kazoo.exceptions", "kazoo").LockTimeout

zk = KazooClient(hosts=os.environ["LOCKCHECK_ZK_SERVERS"],
                 timeout=env_ms("LOCKCHECK_SESSION_TIMEOUT_MS"))
# The session's state changes, in the program's log (SUSPENDED on a lost connection, LOST when
# the server expired the session).
zk.add_listener(lambda state: print("session %s" % state, file=sys.stderr))
zk.start()
lock = zk.Lock(os.environ["LOCKCHECK_KEY"], os.environ["LOCKCHECK_CLIENT_ID"])


def acquire():
    try:
        if not lock.acquire(timeout=env_ms("LOCKCHECK_WAIT_MS")):
            return None
    except LockTimeout:
        return None
    # "<uuid>__lock__0000000007": the last ten digits are the sequence ZooKeeper appended.
    return {"token": int(lock.node[-10:]), "owner": lock.node}


def release():
    return lock.release()


serve(acquire, release)
