'use strict';
// Invocation model: async and callback styles, concurrency, errors, logging, cancel, cost.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startHost, typed, processCpuMs } = require('../test-support/fake-host');

const T = { t: { type: 'queueTrigger', direction: 'IN' } };
const RET = { ...T, $return: { type: 'queue', direction: 'OUT' } };
const OUT = { ...T, out: { type: 'queue', direction: 'OUT' } };

const APP = {
  'async/index.js': `module.exports = async function (context, t) {
    await new Promise((r) => setTimeout(r, 10));
    return 'async:' + t;
  };`,
  'callback/index.js': `module.exports = function (context, t) {
    setTimeout(() => context.done(null, 'callback:' + t), 10);
  };`,
  'callbackBindings/index.js': `module.exports = function (context, t) {
    context.bindings.out = 'out:' + t;
    context.done();
  };`,
  'slow/index.js': `module.exports = async function (context, t) {
    const start = Date.now();
    await new Promise((r) => setTimeout(r, 400));
    return { start, end: Date.now() };
  };`,
  'throws/index.js': `module.exports = async function (context, t) {
    throw new Error('boom: ' + t);
  };`,
  'throwsSync/index.js': `module.exports = function (context, t) { null.nope(); };`,
  'doneError/index.js': `module.exports = function (context, t) { setTimeout(() => context.done(new Error('callback failed')), 5); };`,
  'throwsString/index.js': `module.exports = async function () { throw 'a plain string'; };`,
  'logs/index.js': `module.exports = async function (context, t) {
    context.log('info %s %d', 'via call', 1);
    context.log.info('info via .info');
    context.log.warn('a warning');
    context.log.error('an error', { code: 7 });
    context.log.verbose('verbose detail');
    console.log('to stdout');
    return 'logged';
  };`,
  'ctx/index.js': `module.exports = async function (context, t) {
    return JSON.stringify({ invocationId: context.invocationId, executionContext: context.executionContext,
      bindings: context.bindings, hasTraceContext: typeof context.traceContext === 'object' });
  };`,
  'stray/index.js': `module.exports = async function () { Promise.reject(new Error('nobody awaits me')); return 'ok'; };`,
  'noop/index.js': `module.exports = async function (context, req) {};`,
};

describe('invocations', () => {
  let host;
  before(async () => {
    host = await startHost({ files: APP });
    await host.init();
    const loads = [
      ['async', RET], ['callback', RET], ['callbackBindings', OUT], ['slow', RET], ['throws', RET], ['throwsSync', RET],
      ['doneError', RET], ['throwsString', RET], ['logs', RET], ['ctx', RET], ['stray', RET],
      ['noop', { req: { type: 'httpTrigger', direction: 'IN' }, res: { type: 'http', direction: 'OUT' } }],
    ];
    for (const [name, bindings] of loads) {
      const r = await host.load(name, { name, script_file: `${name}/index.js`, bindings });
      assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    }
  });
  after(() => host && host.stop());

  const invoke = (id, value = 'v') => host.invoke(id, { input_data: [{ name: 't', data: typed.string(value) }] });
  function ok(r) {
    assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    return r;
  }

  test('async function: resolved value is the $return', async () => {
    const r = ok(await invoke('async', 'a'));
    assert.equal(r.return_value.string, 'async:a');
  });

  test('callback style: context.done(null, result)', async () => {
    const r = ok(await invoke('callback', 'b'));
    assert.equal(r.return_value.string, 'callback:b');
  });

  test('callback style: outputs from context.bindings after context.done()', async () => {
    const r = ok(await invoke('callbackBindings', 'c'));
    assert.deepEqual(r.output_data.map((o) => [o.name, o.data.string]), [['out', 'out:c']]);
  });

  test('invocations run concurrently', async () => {
    const [a, b] = await Promise.all([invoke('slow'), invoke('slow')]);
    const ra = JSON.parse(ok(a).return_value.json);
    const rb = JSON.parse(ok(b).return_value.json);
    assert.ok(ra.start < rb.end && rb.start < ra.end, 'the two invocations overlap');
  });

  for (const [id, message, where] of [
    ['throws', 'boom: v', /throws[/\\]index\.js/],
    ['throwsSync', "Cannot read properties of null (reading 'nope')", /throwsSync[/\\]index\.js/],
    ['doneError', 'callback failed', /doneError[/\\]index\.js/],
  ]) {
    test(`error (${id}) -> FAILURE with message and stack, plus an ERROR RpcLog`, async () => {
      const r = await invoke(id);
      assert.equal(r.result.status, 'FAILURE');
      const ex = r.result.exception;
      assert.equal(ex.source, id);
      assert.equal(ex.message, message);
      assert.match(ex.stack_trace, where, 'stack points into the function file');
      const errors = host.logsFor(r.invocation_id).filter((l) => l.level === 'ERROR');
      assert.equal(errors.length, 1);
      assert.ok(errors[0].message.includes(message), errors[0].message);
      assert.equal(errors[0].exception.message, ex.message);
    });
  }

  test('a thrown non-Error value still fails with its text', async () => {
    const r = await invoke('throwsString');
    assert.equal(r.result.status, 'FAILURE');
    assert.equal(r.result.exception.message, 'a plain string');
  });

  test('context.log levels -> RpcLog with invocation id and user category, before the response', async () => {
    const r = ok(await invoke('logs'));
    const logs = host.logsFor(r.invocation_id).map((l) => [l.level, l.category, l.message]);
    assert.deepEqual(logs, [
      ['INFORMATION', 'Function.logs.User', 'info via call 1'],
      ['INFORMATION', 'Function.logs.User', 'info via .info'],
      ['WARNING', 'Function.logs.User', 'a warning'],
      ['ERROR', 'Function.logs.User', 'an error { code: 7 }'],
      ['TRACE', 'Function.logs.User', 'verbose detail'],
    ]);
    const responseIndex = host.received.findIndex((m) => m.content === 'invocation_response' && m.invocation_response.invocation_id === r.invocation_id);
    const lastLogIndex = host.received.findLastIndex((m) => m.content === 'rpc_log' && m.rpc_log.invocation_id === r.invocation_id);
    assert.ok(lastLogIndex < responseIndex, 'logs arrive before the response');
    // stdout is a separate pipe: it may arrive after the gRPC response.
    for (let i = 0; i < 250 && !/to stdout/.test(host.stdout); i++) await new Promise((res) => setTimeout(res, 20));
    assert.match(host.stdout, /to stdout/);
  });

  test('context: invocationId, executionContext, bindings, traceContext', async () => {
    const r = ok(await invoke('ctx', 'x'));
    const c = JSON.parse(r.return_value.string);
    assert.equal(c.invocationId, r.invocation_id);
    assert.deepEqual(c.executionContext, {
      invocationId: r.invocation_id, functionName: 'ctx', functionDirectory: `${host.appDir}/ctx`, retryContext: null,
    });
    assert.deepEqual(c.bindings, { t: 'x' });
    assert.equal(c.hasTraceContext, true);
  });

  test('InvocationCancel is accepted without disturbing the invocation', async () => {
    const pending = host.invoke('slow', { invocation_id: 'to-cancel', input_data: [{ name: 't', data: typed.string('v') }] });
    host.send({ invocation_cancel: { invocation_id: 'to-cancel' } });
    host.send({ invocation_cancel: { invocation_id: 'unknown-invocation' } });
    ok(await pending);
    ok(await invoke('async'));
  });

  test('a stray unhandled rejection is logged and the worker keeps serving', async () => {
    const r = ok(await invoke('stray'));
    assert.equal(r.return_value.string, 'ok');
    ok(await invoke('async'));
    const deadline = Date.now() + 2000;
    while (!host.logs.some((l) => /nobody awaits me/.test(l.message)) && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 20));
    }
    assert.ok(host.logs.some((l) => l.invocation_id === '' && l.level === 'ERROR' && /nobody awaits me/.test(l.message)));
  });

});
