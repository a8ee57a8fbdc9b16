'use strict';
// Standby and specialisation: a worker started before its app is known takes the app's
// environment, directory and capabilities from FunctionEnvironmentReloadRequest.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const os = require('os');
const path = require('path');
const { startHost, typed } = require('../test-support/fake-host');

const ENV_APP = {
  'env/index.js': `module.exports = async function (context) {
    return JSON.stringify({ setting: process.env.APP_SETTING, standby: process.env.STANDBY_ONLY, cwd: process.cwd() });
  };`,
};
const BINDINGS = { t: { type: 'queueTrigger', direction: 'IN' }, $return: { type: 'queue', direction: 'OUT' } };

async function standbyHost(t, options = {}) {
  const standbyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'faast-node-standby-'));
  const host = await startHost({ ...options, cwd: standbyDir });
  t.after(async () => {
    await host.stop();
    fs.rmSync(standbyDir, { recursive: true, force: true });
  });
  const init = await host.init();
  assert.equal(init.worker_init_response.result.status, 'SUCCESS');
  return host;
}

test('a standby worker takes the app\'s environment and directory on reload, then runs its functions', async (t) => {
  const host = await standbyHost(t, { files: ENV_APP, env: { STANDBY_ONLY: '1' } });
  const reload = await host.reload({ APP_SETTING: 'set by the app' });
  assert.equal(reload.result.status, 'SUCCESS');
  assert.equal(reload.capabilities.concurrent, '1');
  assert.equal((await host.load('env', { name: 'env', script_file: 'env/index.js', bindings: BINDINGS })).result.status, 'SUCCESS');
  const response = await host.invoke('env', { input_data: [{ name: 't', data: typed.string('x') }] });
  assert.equal(response.result.status, 'SUCCESS');
  assert.deepEqual(JSON.parse(response.return_value.string), { setting: 'set by the app', cwd: fs.realpathSync(host.appDir) });
});

test('reload offers the app\'s shared memory and the worker accepts it', async (t) => {
  const host = await standbyHost(t);
  const reload = await host.reload({}, { capabilities: host.shmCapabilities() });
  assert.equal(reload.result.status, 'SUCCESS');
  assert.equal(reload.capabilities.shared_memory, '1');
});

test('reload to a missing app directory fails naming it', async (t) => {
  const host = await standbyHost(t);
  const missing = path.join(os.tmpdir(), `faast-no-such-app-${process.pid}`);
  const reload = await host.reload({}, { dir: missing });
  assert.equal(reload.result.status, 'FAILURE');
  assert.match(reload.result.exception.message, new RegExp(missing.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  assert.match(reload.result.exception.message, /ENOENT/);
});
