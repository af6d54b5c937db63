// lockcheck adapter for node-redlock 4 (with ioredis 4): SET NX PX on every master, a majority
// within the validity time (driftFactor 0.01); no fencing, no automatic extension. With
// LOCKCHECK_SENTINELS set (a Sentinel run) each master is one ioredis client that finds it
// through the sentinels (`new Redis({ sentinels, name })`). With LOCKCHECK_REDIS_CLUSTER_NODES
// set (a Redis Cluster run) redlock gets one ioredis `Cluster` client made from the seed nodes,
// the setup node-redlock's README shows for a cluster: a quorum of one, on the key's master.
'use strict';
const { requireLibrary, serve } = require('./lockcheck_protocol');

const Redis = requireLibrary('ioredis');
const Redlock = requireLibrary('redlock');

const env = process.env;
const timeout = Number(env.LOCKCHECK_REQUEST_TIMEOUT_MS);
const options = { connectTimeout: timeout, commandTimeout: timeout, maxRetriesPerRequest: 1 };
const sentinels = (env.LOCKCHECK_SENTINELS || '').split(',').filter(Boolean).map((a) => {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
});
const clusterNodes = (env.LOCKCHECK_REDIS_CLUSTER_NODES || '').split(',').filter(Boolean).map((a) => {
  const i = a.lastIndexOf(':');
  return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
});
let clients;
if (clusterNodes.length) clients = [new Redis.Cluster(clusterNodes, { redisOptions: options })];
else if (sentinels.length) {
  clients = env.LOCKCHECK_SENTINEL_MASTERS.split(',').map((name) => new Redis({ sentinels, name, ...options }));
} else clients = env.LOCKCHECK_REDIS_URLS.split(',').map((u) => new Redis(u, options));
const retryDelay = Number(env.LOCKCHECK_RETRY_MS.split(',')[0]) || 10;
const redlock = new Redlock(clients, {
  driftFactor: 0.01,
  retryDelay,
  retryJitter: Number(env.LOCKCHECK_RETRY_MS.split(',')[1]) - retryDelay,
  retryCount: Math.ceil(Number(env.LOCKCHECK_WAIT_MS) / retryDelay),
});
redlock.on('clientError', (e) => console.error('redlock client error:', e.message));
let held = null;

async function acquire() {
  try {
    held = await redlock.lock(env.LOCKCHECK_KEY, Number(env.LOCKCHECK_TTL_MS));
  } catch (e) {
    if (e instanceof Redlock.LockError) return { result: 'failed' };
    throw e;
  }
  return { result: 'acquired', lease_ms: Math.max(0, held.expiration - Date.now()) };
}

async function release() {
  const lock = held;
  held = null;
  try {
    await lock.unlock();
    return { result: 'released' };
  } catch (e) {
    if (e instanceof Redlock.LockError) return { result: 'failed' };
    throw e;
  }
}

serve({ acquire, release });
