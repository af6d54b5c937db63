// lockcheck's client protocol (docs/client-protocol.md), version 1, for Node adapters: the
// request loop, notices, and the pinned library an adapter drives, loaded with a clear exit 2
// when it is not installed.
'use strict';
const readline = require('readline');

// The pinned library `name` (from clients/node/node_modules/); when it is not installed, says
// what to run and exits 2 (lockcheck then stops the run: the program exited before `hello`).
function requireLibrary(name) {
  try {
    return require(name);
  } catch (e) {
    if (e && e.code === 'MODULE_NOT_FOUND' && String(e.message).includes(`'${name}'`)) {
      console.error(`${name} is not installed: run scripts/install-clients.sh (it installs the `
        + 'pinned version into clients/node/node_modules/)');
      process.exit(2);
    }
    throw e;
  }
}

// A line the program sends on its own, between replies (`{"event": "renewed", ...}`).
function notify(notice) {
  process.stdout.write(JSON.stringify(notice) + '\n');
}

// Answers lockcheck's requests with `ops.acquire()` and `ops.release()` (each resolving to the
// reply's fields), one at a time, in order, as lockcheck sends them; whatever they throw is an
// `error` reply.
function serve(ops) {
  const handle = async (req) => {
    if (req.op === 'hello') return { result: 'ready' }; // start-up is over: the run may begin
    if (req.op === 'write') return { result: 'written' };
    if (req.op === 'acquire') return ops.acquire();
    if (req.op === 'release') return ops.release();
    return { result: 'error', message: `unknown op ${req.op}` };
  };
  let queue = Promise.resolve();
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const req = JSON.parse(line);
    queue = queue.then(() => handle(req))
      .catch((e) => ({ result: 'error', message: String((e && e.message) || e) }))
      .then((rep) => process.stdout.write(JSON.stringify({ id: req.id, ...rep }) + '\n'));
  }).on('close', () => queue.then(() => process.exit(0))); // answer what was asked first
}

module.exports = { notify, requireLibrary, serve };
