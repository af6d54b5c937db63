// lockcheck adapter for npm etcd3's lock (`Etcd3#lock(key).ttl(s).acquire()`, etcd3 1.1.2). It is
// a try-lock: acquire() grants a lease, puts the key with it if the key does not exist yet (a
// transaction on the key's create revision) and keeps the lease alive from then on (a keep-alive
// every third of the TTL); it fails at once (EtcdLockFailedError) when another client holds the
// key, so this adapter tries again, as a caller must, until LOCKCHECK_WAIT_MS is over. release()
// revokes the lease, which deletes the key; etcd3 answers it without error even when the lease
// had already expired. No fencing in the library: it exposes the lease's id (leaseId()) only.
//
// Token: the lock key's create revision, read once the lock is held (a range read of the key,
// kept only when the key is still this lease's): etcd's own fencing token, the one etcd's
// concurrency.Mutex hands out. Each keep-alive the lease answers is sent as a `renewed` notice;
// etcd3 keeps the lease in the lock's `lease` property (no public accessor in 1.1.2).
'use strict';
const { notify, requireLibrary, serve } = require('./lockcheck_protocol');

const { Etcd3, EtcdLockFailedError } = requireLibrary('etcd3');

const env = process.env;
const key = env.LOCKCHECK_KEY;
const ttlMs = Number(env.LOCKCHECK_TTL_MS);
const timeout = Number(env.LOCKCHECK_REQUEST_TIMEOUT_MS);
const [retryLo, retryHi] = env.LOCKCHECK_RETRY_MS.split(',').map(Number);
const client = new Etcd3({
  hosts: env.LOCKCHECK_ETCD_ENDPOINTS.split(','),
  dialTimeout: timeout,
  // Every call but the keep-alive stream gives up after the request timeout.
  defaultCallOptions: (call) => (call.isStream ? {} : { deadline: Date.now() + timeout }),
});
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
let held = null;

async function acquire() {
  const deadline = Date.now() + Number(env.LOCKCHECK_WAIT_MS);
  for (;;) {
    const lock = client.lock(key).ttl(ttlMs / 1000);
    const tried = Date.now();
    try {
      await lock.acquire();
    } catch (e) {
      if (!(e instanceof EtcdLockFailedError)) throw e;
      if (Date.now() >= deadline) return { result: 'failed' };
      await sleep(retryLo + Math.random() * (retryHi - retryLo));
      continue;
    }
    held = lock;
    lock.lease.on('keepaliveSucceeded', (res) => {
      if (held === lock) notify({ event: 'renewed', validity_ms: Number(res.TTL) * 1000 });
    });
    lock.lease.on('lost', (e) => console.error(`lease lost: ${e.message}`));
    const id = await lock.leaseId();
    // The lease was granted at the start of this try: that is where its TTL runs from.
    const reply = { result: 'acquired', lease_ms: Math.max(0, ttlMs - (Date.now() - tried)), owner: String(id) };
    const { kvs } = await client.get(key).exec();
    if (kvs.length === 1 && String(kvs[0].lease) === String(id)) {
      reply.token = Number(kvs[0].create_revision);
    }
    return reply;
  }
}

async function release() {
  const lock = held;
  held = null;
  await lock.release();
  return { result: 'released' };
}

serve({ acquire, release });
