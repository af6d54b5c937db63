"""lockcheck's client protocol (docs/client-protocol.md), version 1: the request loop, and the
pinned library an adapter drives, imported with a clear exit 2 when it is not installed.

An adapter supplies acquire() -> dict | None (None: not acquired within the wait bound; a dict
may carry "lease_ms", "token", "owner") and release() -> bool | None (False: the lock was no
longer ours; None: the outcome is not known, e.g. the connection broke after the delete went out). Anything else the library raises is answered as an "error" reply. Logs go to stderr:
stdout carries protocol lines only.
"""
import importlib
import json
import os
import select
import sys
import time


def _sleep_through_select():
    """Under lockcheck's libfaketime (a client clock fault: LD_PRELOAD with
    FAKETIME_DONT_FAKE_MONOTONIC=1), Python 3.11+'s time.sleep fails with EINVAL: it sleeps with
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), whose deadline libfaketime 0.9.10 mistranslates
    when it leaves the monotonic clock alone. select() sleeps for the same relative time and is
    left alone, so time.sleep is replaced by it before the library is imported (its
    `from time import sleep` then gets this one too)."""
    if "faketime" not in os.environ.get("LD_PRELOAD", ""):
        return

    def sleep(seconds):
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        select.select([], [], [], seconds)

    time.sleep = sleep


_sleep_through_select()


def require(module, package):
    """Imports `module` of the pinned library `package`; when the library is not installed, says
    what to run and exits 2 (lockcheck then stops the run: the program exited before `hello`)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if e.name is None or e.name.split(".")[0] != module.split(".")[0]:
            raise
        print("%s is not installed for %s: run scripts/install-clients.sh (it installs the "
              "pinned version into .venv-clients/)" % (package, sys.executable), file=sys.stderr)
        sys.exit(2)


def env_ms(name):
    return int(os.environ[name]) / 1000.0


def serve(acquire, release):
    for line in sys.stdin:
        req = json.loads(line)
        rep = {"id": req["id"]}
        try:
            if req["op"] == "acquire":
                got = acquire()
                rep.update(result="acquired", **got) if got is not None else rep.update(result="failed")
            elif req["op"] == "release":
                done = release()
                rep["result"] = "unknown" if done is None else "released" if done else "failed"
            elif req["op"] == "hello":  # start-up is over: the run may begin
                rep["result"] = "ready"
            elif req["op"] == "write":
                rep["result"] = "written"
            else:
                rep.update(result="error", message="unknown op " + req["op"])
        except Exception as e:  # the library's failure is the reply, not a crash
            rep.update(result="error", message="%s: %s" % (type(e).__name__, e))
        print(json.dumps(rep), flush=True)
