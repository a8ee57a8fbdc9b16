'use strict';
// Handshake, termination and "never outlive the host" behaviour of the real worker.js.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const net = require('net');
const { spawn } = require('child_process');
const { startHost, typed, withTimeout, WORKER_JS } = require('../test-support/fake-host');

const SLOW_APP = {
  'slow/index.js': `module.exports = async function (context) {
    await new Promise((r) => setTimeout(r, 300));
    return 'finished';
  };`,
};
const SLOW_BINDINGS = { t: { type: 'queueTrigger', direction: 'IN' }, $return: { type: 'queue', direction: 'OUT' } };

test('handshake: StartStream carries the worker id; init response echoes request_id with capabilities', async (t) => {
  const host = await startHost();
  t.after(() => host.stop());
  const start = await host.waitConnected();
  assert.equal(start.worker_id, host.workerId);

  // Offered without a directory, shared memory is declined (test/shared-memory.test.js has the rest).
  const reply = await host.init({ shared_memory: '1' });
  assert.equal(reply.request_id, 'init-1');
  const init = reply.worker_init_response;
  assert.equal(init.result.status, 'SUCCESS');
  assert.ok(init.worker_version.length > 0, 'worker_version is set');
  assert.deepEqual({ ...init.capabilities }, { concurrent: '1' });
});

test('WorkerTerminate waits for in-flight invocations, closes the stream and exits 0', async (t) => {
  const host = await startHost({ files: SLOW_APP });
  t.after(() => host.stop());
  await host.init();
  assert.equal((await host.load('slow', { name: 'slow', script_file: 'slow/index.js', bindings: SLOW_BINDINGS })).result.status, 'SUCCESS');

  const pending = host.invoke('slow', { input_data: [{ name: 't', data: typed.string('x') }] });
  await new Promise((r) => setTimeout(r, 50)); // the invocation is now running
  host.terminate(5000);
  const response = await pending;
  assert.equal(response.result.status, 'SUCCESS');
  assert.equal(response.return_value.string, 'finished');
  await withTimeout(host.streamEndedPromise, 3000, 'worker to end the stream');
  const exit = await host.waitExit(3000);
  assert.equal(exit.code, 0);
});

test('WorkerTerminate when idle exits 0 promptly', async (t) => {
  const host = await startHost();
  t.after(() => host.stop());
  await host.init();
  const sentAt = Date.now();
  host.terminate(0);
  const exit = await host.waitExit(3000);
  assert.equal(exit.code, 0);
  assert.ok(exit.at - sentAt < 8000, `exited after ${exit.at - sentAt} ms`);
});

test('WorkerTerminate does not wait beyond the grace period', async (t) => {
  const host = await startHost({ files: { 'hang/index.js': 'module.exports = function (context) { /* never calls done */ };' } });
  t.after(() => host.stop());
  await host.init();
  await host.load('hang', { name: 'hang', script_file: 'hang/index.js', bindings: SLOW_BINDINGS });
  host.invoke('hang', { input_data: [{ name: 't', data: typed.string('x') }] }).catch(() => {});
  await new Promise((r) => setTimeout(r, 50));
  const sentAt = Date.now();
  host.terminate(300);
  const exit = await host.waitExit(3000);
  assert.equal(exit.code, 0);
  const took = exit.at - sentAt;
  assert.ok(took >= 250 && took < 8000, `exited after ${took} ms`);
});

test('host closing the stream makes the worker exit non-zero promptly', async (t) => {
  const host = await startHost();
  t.after(() => host.stop());
  await host.init();
  const closedAt = Date.now();
  host.closeStream();
  const exit = await host.waitExit(3000);
  assert.notEqual(exit.code, 0);
  assert.ok(exit.at - closedAt < 8000, `exited after ${exit.at - closedAt} ms`);
});

test('host dying (server gone) makes the worker exit non-zero promptly', async (t) => {
  const host = await startHost();
  t.after(() => host.stop());
  await host.init();
  const killedAt = Date.now();
  host.server.forceShutdown();
  const exit = await host.waitExit(3000);
  assert.notEqual(exit.code, 0);
  assert.ok(exit.at - killedAt < 8000, `exited after ${exit.at - killedAt} ms`);
});

test('worker exits when its parent process disappears', async (t) => {
  const host = await startHost({ spawnWorker: false });
  // An intermediate parent that launches the worker, reports its pid, then is killed.
  const launcher = `
    const { spawn } = require('child_process');
    const w = spawn(process.execPath, ${JSON.stringify([WORKER_JS, '--host', '127.0.0.1', '--port', String(host.port), '--worker-id', 'orphan'])},
      { stdio: 'ignore', cwd: ${JSON.stringify(host.appDir)} });
    console.log(w.pid);
    setInterval(() => {}, 1000);`;
  const parent = spawn(process.execPath, ['-e', launcher], { stdio: ['ignore', 'pipe', 'inherit'] });
  let workerPid;
  t.after(async () => {
    try { process.kill(workerPid, 'SIGKILL'); } catch { /* already gone */ }
    try { parent.kill('SIGKILL'); } catch { /* already gone */ }
    await host.stop();
  });
  workerPid = Number(await withTimeout(new Promise((resolve) => parent.stdout.once('data', (d) => resolve(String(d).trim()))), 5000, 'worker pid'));
  await host.waitConnected();
  await host.init();
  parent.kill('SIGKILL');
  const killedAt = Date.now();
  // Gone, or a zombie waiting for its new parent to reap it.
  const alive = () => {
    try { return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${workerPid}/stat`, 'utf8')); } catch { return false; }
  };
  while (alive() && Date.now() - killedAt < 9000) await new Promise((r) => setTimeout(r, 50));
  assert.equal(alive(), false, 'worker still running 4 s after its parent died');
  assert.ok(Date.now() - killedAt < 8000, `worker exited ${Date.now() - killedAt} ms after its parent died`);
});

test('an uncaught exception from user code is reported (CRITICAL) and the worker exits non-zero', async (t) => {
  const host = await startHost({ files: { 'bad/index.js': `module.exports = function (context) {
    setTimeout(() => { throw new Error('thrown from a timer'); }, 5);
  };` } });
  t.after(() => host.stop());
  await host.init();
  await host.load('bad', { name: 'bad', script_file: 'bad/index.js', bindings: SLOW_BINDINGS });
  host.invoke('bad', { input_data: [{ name: 't', data: typed.string('x') }] }).catch(() => {});
  const exit = await host.waitExit(3000);
  assert.notEqual(exit.code, 0);
  assert.ok(host.logs.some((l) => l.level === 'CRITICAL' && /thrown from a timer/.test(l.message)), 'CRITICAL RpcLog sent');
});

test('worker exits non-zero when it cannot reach the host', async (t) => {
  // A port with nothing listening on it.
  const port = await new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => { const p = srv.address().port; srv.close(() => resolve(p)); });
  });
  const child = spawn(process.execPath, [WORKER_JS, '--host', '127.0.0.1', '--port', String(port), '--worker-id', 'x', '--connect-timeout-ms', '300'], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const code = await withTimeout(new Promise((resolve) => child.on('exit', resolve)), 4000, 'worker exit');
  assert.notEqual(code, 0);
  assert.match(stderr, /cannot connect to host/);
});

test('a missing --port is a usage error', async (t) => {
  const child = spawn(process.execPath, [WORKER_JS, '--worker-id', 'x'], { stdio: ['ignore', 'ignore', 'pipe'] });
  t.after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const code = await withTimeout(new Promise((resolve) => child.on('exit', resolve)), 4000, 'worker exit');
  assert.equal(code, 2);
  assert.match(stderr, /--port/);
});
