'use strict';
// FunctionLoadRequest: entry point selection (Azure Functions Node v3 rules) and load failures.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('path');
const { startHost, typed } = require('../test-support/fake-host');

const BINDINGS = { t: { type: 'queueTrigger', direction: 'IN' }, $return: { type: 'queue', direction: 'OUT' } };

const APP = {
  'plain/index.js': `module.exports = async function (context, t) { return 'plain:' + t; };`,
  'named/index.js': `
    exports.helper = function () { return 'wrong'; };
    exports.handler = async function (context, t) { return 'handler:' + t; };`,
  'single/index.js': `exports.onlyOne = async function (context, t) { return 'single:' + t; }; exports.answer = 42;`,
  'conventional/index.js': `
    exports.helper = function () { return 'wrong'; };
    exports.run = async function (context, t) { return 'run:' + (this === module.exports); };`,
  'byindex/index.js': `
    exports.helper = function () { return 'wrong'; };
    exports.index = async function (context, t) { return 'index'; };`,
  'ambiguous/index.js': `exports.alpha = function () {}; exports.beta = function () {};`,
  'noentry/index.js': `module.exports = { answer: 42 };`,
  'syntax/index.js': `module.exports = async function (context) {\n  return 'oops';\n};\n}}} this is not javascript\n`,
  'throws/index.js': `throw new Error('module init failed on purpose');`,
  'esm/index.mjs': `export default async function (context, t) { return 'esm:' + t; }`,
  'esm2/index.mjs': `export async function handler(context, t) { return 'esm2:' + t; }`,
  // What tsc emits for `export default f` (module: commonjs): a non-enumerable __esModule marker.
  'tsdefault/index.js': `"use strict";
    Object.defineProperty(exports, "__esModule", { value: true });
    const httpTrigger = async function (context, t) { return 'ts:' + t; };
    exports.default = httpTrigger;`,
  // Other transpilers (Babel's loose mode) make the marker enumerable: still not a function.
  'tsloose/index.js': `exports.__esModule = true; exports.default = async function (context, t) { return 'loose:' + t; };`,
  'tsobject/index.js': `"use strict";
    Object.defineProperty(exports, "__esModule", { value: true });
    exports.default = { answer: 42 };`,
  'tsseveral/index.js': `"use strict";
    Object.defineProperty(exports, "__esModule", { value: true });
    exports.helper = function () { return 'wrong'; };
    exports.default = async function (context, t) { return 'tsseveral:' + t; };`,
  'number/index.js': `module.exports = 42;`,
  'env/index.js': `module.exports = async function () { return JSON.stringify({ cwd: process.cwd(), setting: process.env.MY_APP_SETTING }); };`,
};

describe('function loading', () => {
  let host;
  before(async () => {
    host = await startHost({ files: APP, env: { MY_APP_SETTING: 'from-app-settings' } });
    await host.init();
  });
  after(() => host && host.stop());

  async function loadOk(id, name, scriptFile, entryPoint = '') {
    const res = await host.load(id, { name, script_file: scriptFile, entry_point: entryPoint, bindings: BINDINGS });
    assert.equal(res.function_id, id);
    assert.equal(res.result.status, 'SUCCESS', res.result.exception && res.result.exception.message);
  }
  async function call(id, value = 'v') {
    const r = await host.invoke(id, { input_data: [{ name: 't', data: typed.string(value) }] });
    assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    return r.return_value.string;
  }
  async function loadFails(id, name, scriptFile, entryPoint = '') {
    const res = await host.load(id, { name, script_file: scriptFile, entry_point: entryPoint, bindings: BINDINGS });
    assert.equal(res.function_id, id);
    assert.equal(res.result.status, 'FAILURE');
    const message = res.result.exception.message;
    assert.ok(message.includes(`'${name}'`), `message names the function: ${message}`);
    assert.ok(message.includes(path.join(host.appDir, scriptFile)), `message names the file: ${message}`);
    return message;
  }

  test('module.exports = function', async () => {
    await loadOk('f-plain', 'plain', 'plain/index.js');
    assert.equal(await call('f-plain'), 'plain:v');
  });

  test('entry_point picks the named export', async () => {
    await loadOk('f-named', 'named', 'named/index.js', 'handler');
    assert.equal(await call('f-named'), 'handler:v');
  });

  test('a single exported function is used', async () => {
    await loadOk('f-single', 'single', 'single/index.js');
    assert.equal(await call('f-single'), 'single:v');
  });

  test("an export named 'run' is used (with this = module.exports)", async () => {
    await loadOk('f-run', 'conventional', 'conventional/index.js');
    assert.equal(await call('f-run'), 'run:true');
  });

  test("an export named 'index' is used", async () => {
    await loadOk('f-index', 'byindex', 'byindex/index.js');
    assert.equal(await call('f-index'), 'index');
  });

  test('ES module default export (.mjs)', async () => {
    await loadOk('f-esm', 'esm', 'esm/index.mjs');
    assert.equal(await call('f-esm'), 'esm:v');
  });

  test('an invocation sent right behind its (async, ESM) load waits for the load', async () => {
    const loaded = host.load('f-esm2', { name: 'esm2', script_file: 'esm2/index.mjs', entry_point: 'handler', bindings: BINDINGS });
    const invoked = host.invoke('f-esm2', { input_data: [{ name: 't', data: typed.string('w') }] });
    assert.equal((await loaded).result.status, 'SUCCESS');
    const r = await invoked;
    assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    assert.equal(r.return_value.string, 'esm2:w');
  });

  test('a TypeScript default export (exports.default with __esModule) is the entry point', async () => {
    await loadOk('f-tsdefault', 'tsdefault', 'tsdefault/index.js');
    assert.equal(await call('f-tsdefault'), 'ts:v');
  });

  test('an enumerable __esModule marker does not count as a second export', async () => {
    await loadOk('f-tsloose', 'tsloose', 'tsloose/index.js');
    assert.equal(await call('f-tsloose'), 'loose:v');
  });

  test("entry_point 'default' picks the default export among several functions", async () => {
    await loadOk('f-tsseveral-default', 'tsseveral', 'tsseveral/index.js', 'default');
    assert.equal(await call('f-tsseveral-default'), 'tsseveral:v');
  });

  test('a default export that is not a function is a load error naming the file and the exports', async () => {
    const message = await loadFails('f-tsobject', 'tsobject', 'tsobject/index.js');
    assert.match(message, /does not export a function \(exports: default \(object\)\)/);
  });

  test('a default export beside another function and no entry_point is a load error listing both', async () => {
    const message = await loadFails('f-tsseveral', 'tsseveral', 'tsseveral/index.js');
    assert.match(message, /several functions \(helper, default\)/);
    assert.match(message, /set entryPoint/);
  });

  test('a module that exports a number is a load error saying so', async () => {
    const message = await loadFails('f-number', 'number', 'number/index.js');
    assert.match(message, /does not export a function \(exports: none; the module is a number\)/);
  });

  test('functions run with cwd = app dir and app settings in the environment', async () => {
    await loadOk('f-env', 'env', 'env/index.js');
    const { cwd, setting } = JSON.parse(await call('f-env'));
    assert.equal(cwd, host.appDir);
    assert.equal(setting, 'from-app-settings');
  });

  test('missing script file', async () => {
    const message = await loadFails('f-missing', 'missing', 'missing/index.js');
    assert.match(message, /does not exist/);
  });

  test('syntax error', async () => {
    const message = await loadFails('f-syntax', 'syntax', 'syntax/index.js');
    assert.match(message, /SyntaxError/);
    assert.match(message, /index\.js:4/, 'points at the offending line');
  });

  test('module that throws while loading', async () => {
    const message = await loadFails('f-throws', 'throws', 'throws/index.js');
    assert.match(message, /module init failed on purpose/);
  });

  test('no exported function', async () => {
    const message = await loadFails('f-noentry', 'noentry', 'noentry/index.js');
    assert.match(message, /does not export a function/);
  });

  test('several exported functions and no run/index', async () => {
    const message = await loadFails('f-ambiguous', 'ambiguous', 'ambiguous/index.js');
    assert.match(message, /several functions \(alpha, beta\)/);
  });

  test('entry_point that is not exported', async () => {
    const message = await loadFails('f-badentry', 'badentry', 'named/index.js', 'nope');
    assert.match(message, /entry point 'nope'/);
    assert.match(message, /exports: helper, handler/);
  });

  test('invoking a function that failed to load fails the invocation', async () => {
    const r = await host.invoke('f-missing', { input_data: [{ name: 't', data: typed.string('v') }] });
    assert.equal(r.result.status, 'FAILURE');
    assert.match(r.result.exception.message, /not loaded/);
    assert.match(r.result.exception.message, /does not exist/, 'says why it is not loaded');
  });
});
