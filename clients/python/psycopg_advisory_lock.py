"""lockcheck adapter for PostgreSQL's session advisory lock through psycopg 3, in the pattern
psycopg's and PostgreSQL's documentation show: an autocommit connection, `SET lock_timeout` to the
wait bound, `SELECT pg_advisory_lock(key)`, and `SELECT pg_advisory_unlock(key)` to release, whose
boolean answer says whether this session held it (False comes with a WARNING, which psycopg
reports as a notice, not an error).

The lock belongs to the server session: when that session ends (pg_terminate_backend, an idle
timeout, a failover, a pooler's recycled connection), the lock is gone while this program still
believes it holds; psycopg tells it only on its next statement (an OperationalError), which the
release then reports as unknown. Behind PgBouncer in transaction mode the connection is a server
connection per statement, so the lock stays on whichever server connection ran it.

The key is LOCKCHECK_ADVISORY_KEY, the same bigint lockcheck's own PostgreSQL locks use."""
import os
import sys

from lockcheck_protocol import require, serve

psycopg = require("psycopg", "psycopg")

URL = os.environ["LOCKCHECK_POSTGRES_URL"]
KEY = int(os.environ["LOCKCHECK_ADVISORY_KEY"])
WAIT_MS = int(os.environ["LOCKCHECK_WAIT_MS"])
conn = None


def connection():
    """The open connection, or a new one after a lost one (as a pool would hand out)."""
    global conn
    if conn is None or conn.closed:
        conn = psycopg.connect(URL, autocommit=True)
        conn.add_notice_handler(lambda n: print("notice: %s" % n.message_primary, file=sys.stderr))
    return conn


def acquire():
    global conn
    try:
        c = connection()
        c.execute("SET lock_timeout = %d" % WAIT_MS)
        c.execute("SELECT pg_advisory_lock(%s)", (KEY,))
    except psycopg.errors.LockNotAvailable:
        return None
    except psycopg.OperationalError as e:
        print("acquire: %s" % e, file=sys.stderr)
        conn = None
        return None
    return {"owner": "pid %d" % c.info.backend_pid}


def release():
    global conn
    try:
        row = connection().execute("SELECT pg_advisory_unlock(%s)", (KEY,)).fetchone()
    except psycopg.OperationalError as e:
        # The session is gone, and its lock with it, at a moment this program cannot know.
        print("release: %s" % e, file=sys.stderr)
        conn = None
        return None
    return bool(row[0])


serve(acquire, release)
