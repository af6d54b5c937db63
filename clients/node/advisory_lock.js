// lockcheck adapter for npm advisory-lock 2.0.0 (on pg 8.23.1): PostgreSQL session advisory
// locks keyed by two int32s of the name's SHA-256. Each lock()/tryLock() opens a pg Client of its
// own and takes the lock on it; the returned unlock runs pg_advisory_unlock on that client and
// then ends it (closing the session frees whatever it held anyway). lock() waits with no bound,
// so this adapter polls tryLock() every LOCKCHECK_RETRY_MS until LOCKCHECK_WAIT_MS is over, as a
// caller with a deadline must. The unlock discards pg_advisory_unlock's boolean: it never says
// a release freed nothing, so every release the library completes is reported as `released`.
//
// Behind PgBouncer in transaction mode the Client is PgBouncer's, not a server session: the lock
// stays on the server connection that ran it, and ending the Client does not end that
// connection, which goes back to the pool still holding the lock.
'use strict';
const { requireLibrary, serve } = require('./lockcheck_protocol');

const createMutexes = requireLibrary('advisory-lock').default;

const env = process.env;
// LOCKCHECK_POSTGRES_URL is a libpq key=value string; node-postgres takes a URL.
const kv = Object.fromEntries(env.LOCKCHECK_POSTGRES_URL.split(' ').map((p) => p.split('=')));
const url = `postgresql://${kv.user}@${kv.host}:${kv.port}/${kv.dbname}` +
  `?application_name=${encodeURIComponent(kv.application_name || '')}`;
const mutex = createMutexes(url)(env.LOCKCHECK_KEY);
const [retryLo, retryHi] = env.LOCKCHECK_RETRY_MS.split(',').map(Number);
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
let unlock = null;

async function acquire() {
  const deadline = Date.now() + Number(env.LOCKCHECK_WAIT_MS);
  for (;;) {
    const got = await mutex.tryLock();
    if (got) {
      unlock = got;
      return { result: 'acquired' };
    }
    if (Date.now() >= deadline) return { result: 'failed' };
    await sleep(retryLo + Math.random() * (retryHi - retryLo));
  }
}

async function release() {
  const u = unlock;
  unlock = null;
  await u();
  return { result: 'released' };
}

serve({ acquire, release });
