"""A test client program (docs/client-protocol.md) whose lease is judged on its own wall clock:
the lock is a file holding its owner and the wall-clock time its lease ends, and a client takes
it once that time has passed on *its* clock. It speaks to no service: it is how the tests see
that a clock fault on a client program reaches the program (libfaketime moves `time.time()`),
on every backend whose client programs lockcheck runs.

Usage: python3 clock_lease.py LEASE_FILE
"""
import fcntl
import json
import os
import select
import sys
import time

path = sys.argv[1]
me = os.environ["LOCKCHECK_CLIENT_ID"]
ttl_ms = int(os.environ.get("LOCKCHECK_TTL_MS", "1000"))
wait_ms = int(os.environ["LOCKCHECK_WAIT_MS"])


def now_ms():
    return time.time() * 1000.0


def locked(f):
    """Runs f(lease) under an exclusive flock of the guard file; lease is None when free."""
    with open(path + ".guard", "a") as g:
        fcntl.flock(g, fcntl.LOCK_EX)
        try:
            with open(path) as l:
                lease = json.load(l)
        except (FileNotFoundError, ValueError):
            lease = None
        return f(lease)


def take(lease):
    if lease is not None and lease["owner"] != me and lease["until"] > now_ms():
        return False
    with open(path + ".tmp", "w") as l:
        json.dump({"owner": me, "until": now_ms() + ttl_ms}, l)
    os.replace(path + ".tmp", path)
    return True


def give_back(lease):
    if lease is None or lease["owner"] != me:
        return False
    os.remove(path)
    return True


def acquire():
    deadline = time.monotonic() + wait_ms / 1000.0
    while True:
        if locked(take):
            return {"lease_ms": ttl_ms}
        if time.monotonic() > deadline:
            return None
        # Not time.sleep: under libfaketime it fails (clients/python/lockcheck_protocol.py).
        select.select([], [], [], 0.01)


for line in sys.stdin:
    req = json.loads(line)
    rep = {"id": req["id"]}
    op = req["op"]
    if op == "hello":
        rep["result"] = "ready"
    elif op == "acquire":
        got = acquire()
        if got is None:
            rep["result"] = "failed"
        else:
            rep.update(result="acquired", **got)
    elif op == "release":
        rep["result"] = "released" if locked(give_back) else "failed"
    elif op == "write":
        rep["result"] = "written"
    else:
        rep.update(result="error", message="unknown op " + op)
    print(json.dumps(rep), flush=True)
