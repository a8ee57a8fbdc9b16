'use strict';
// The Node v4 programming model: the real @azure/functions from npm (test-support/v4-deps) on the
// real worker.js, driven over gRPC by the in-test host: indexing (FunctionsMetadataRequest), its
// failures, loading and invoking registered functions, hooks, and v3 apps beside it.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const { startHost, typed, decode } = require('../test-support/fake-host');

const V4_DEPS = path.resolve(__dirname, '..', 'test-support', 'v4-deps');

// ./faast setup installs these; a bare `node --test` checkout installs them here (npm ci, pinned).
function ensureDeps() {
  if (fs.existsSync(path.join(V4_DEPS, 'node_modules', '@azure', 'functions', 'package.json'))) return;
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: V4_DEPS, stdio: 'inherit' });
}

// An app dir with node_modules -> the pinned @azure/functions, as `npm install` in the app would give.
async function startV4(files, capabilities = {}) {
  ensureDeps();
  const host = await startHost({ files });
  fs.symlinkSync(path.join(V4_DEPS, 'node_modules'), path.join(host.appDir, 'node_modules'));
  await host.init(capabilities);
  return host;
}

const HTTP_FN = `const { app } = require('@azure/functions');
app.http('hello', {
  methods: ['GET', 'POST'],
  authLevel: 'anonymous',
  route: 'hello/{name}',
  handler: async (request, context) => {
    context.log('hello from', request.params.name);
    const body = request.method === 'POST' ? await request.text() : '';
    return {
      status: 201,
      jsonBody: { name: request.params.name, q: request.query.get('x'), h: request.headers.get('x-test'), body,
        method: request.method, url: request.url, appStarted: globalThis.appStarted === true,
        functionName: context.functionName, invocationId: context.invocationId },
      headers: { 'x-out': 'yes' },
      cookies: [{ name: 'session', value: 'abc', path: '/', httpOnly: true, sameSite: 'Lax' }],
    };
  },
});
app.http('boom', { handler: async () => { throw new Error('kaboom in handler'); } });
`;

const BLOB_FN = `const { app, input, output } = require('@azure/functions');
const ref = input.storageBlob({ path: 'refs/{name}', connection: 'AzureWebJobsStorage' });
const copy = output.storageBlob({ path: 'out/{name}', connection: 'AzureWebJobsStorage' });
app.storageBlob('copyBlob', {
  path: 'in/{name}',
  connection: 'AzureWebJobsStorage',
  extraInputs: [ref],
  extraOutputs: [copy],
  handler: async (blob, context) => {
    const refBlob = context.extraInputs.get(ref);
    context.log('name', context.triggerMetadata.name);
    context.extraOutputs.set(copy, Buffer.concat([
      Buffer.from(Buffer.isBuffer(blob) ? 'buf:' : 'other:'), blob, Buffer.from('|'), refBlob,
      Buffer.from('|' + context.triggerMetadata.name)]));
  },
});
`;

const MORE_FN = `const { app } = require('@azure/functions');
app.storageQueue('onQueue', {
  queueName: 'jobs',
  connection: 'AzureWebJobsStorage',
  handler: async (message, context) => { context.log('got', message); },
});
app.timer('tick', {
  schedule: '0 */5 * * * *',
  runOnStartup: true,
  useMonitor: false,
  retry: { strategy: 'fixedDelay', maxRetryCount: 3, delayInterval: { seconds: 10 } },
  handler: async (timer, context) => { context.log('past due', timer.isPastDue); },
});
`;

const HOOKS = `const { app } = require('@azure/functions');
app.hook.appStart(() => { globalThis.appStarted = true; });
app.hook.preInvocation((context) => { context.hookData.pre = context.invocationContext.functionName; });
app.hook.postInvocation((context) => {
  if (context.result && context.result.headers) context.result.headers['x-hook'] = 'post saw ' + context.hookData.pre;
});
`;

const APP = {
  // `**`, `{a,b}` and `*` at once; notes.js is outside both folders and must not be loaded.
  'package.json': JSON.stringify({ name: 'v4app', main: 'src/{functions,more}/**/*.js' }),
  'src/functions/http.js': HTTP_FN,
  'src/functions/storage/blob.js': BLOB_FN,
  'src/more/queueAndTimer.js': MORE_FN,
  'src/more/hooks.js': HOOKS,
  'src/notes.js': 'throw new Error("not matched by main: must not be loaded");',
};

function byName(reply) {
  const out = {};
  for (const md of reply.function_metadata_results) {
    out[md.name] = { ...md, bindings: md.raw_bindings.map((b) => JSON.parse(b)) };
  }
  return out;
}

function ok(r) {
  assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
  return r;
}

describe('node v4 app (@azure/functions from npm)', () => {
  let host;
  let fns;
  before(async () => {
    host = await startV4(APP);
    const reply = await host.metadata();
    assert.equal(reply.result.status, 'SUCCESS', reply.result.result);
    assert.equal(reply.use_default_metadata_indexing, false);
    fns = byName(reply);
    for (const md of Object.values(fns)) {
      ok(await host.load(md.function_id, { name: md.name, script_file: md.script_file, directory: md.directory, entry_point: md.entry_point }));
    }
  });
  after(() => host && host.stop());

  test('metadata: one entry per registered function, from the files main matches', () => {
    assert.deepEqual(Object.keys(fns).sort(), ['boom', 'copyBlob', 'hello', 'onQueue', 'tick']);
    const hello = fns.hello;
    assert.equal(hello.directory, host.appDir);
    assert.equal(hello.script_file, path.join(host.appDir, 'src/functions/http.js'));
    assert.equal(fns.copyBlob.script_file, path.join(host.appDir, 'src/functions/storage/blob.js'));
    assert.equal(fns.tick.script_file, path.join(host.appDir, 'src/more/queueAndTimer.js'));
    assert.equal(hello.entry_point, 'hello');
    assert.equal(hello.language, 'node');
    assert.equal(hello.function_id, 'hello');
    const trigger = hello.bindings.find((b) => b.type === 'httpTrigger');
    assert.deepEqual({ ...trigger, name: undefined }, { name: undefined, type: 'httpTrigger', direction: 'in', authLevel: 'anonymous', methods: ['GET', 'POST'], route: 'hello/{name}' });
    assert.deepEqual(hello.bindings.find((b) => b.name === '$return'), { name: '$return', type: 'http', direction: 'out' });
    assert.equal(hello.bindings.length, 2);
  });

  test('metadata: blob trigger with blob input and output, queue, timer with retry', () => {
    const blob = fns.copyBlob.bindings;
    const trig = blob.find((b) => b.type === 'blobTrigger');
    assert.deepEqual({ type: trig.type, direction: trig.direction, path: trig.path, connection: trig.connection },
      { type: 'blobTrigger', direction: 'in', path: 'in/{name}', connection: 'AzureWebJobsStorage' });
    const inputs = blob.filter((b) => b.type === 'blob' && b.direction === 'in');
    const outputs = blob.filter((b) => b.type === 'blob' && b.direction === 'out');
    assert.deepEqual(inputs.map((b) => b.path), ['refs/{name}']);
    assert.deepEqual(outputs.map((b) => b.path), ['out/{name}']);
    assert.equal(inputs[0].connection, 'AzureWebJobsStorage');
    for (const b of blob) assert.equal(b.properties, undefined, 'the library-internal properties flag is not a binding key');

    const queue = fns.onQueue.bindings;
    assert.equal(queue.length, 1);
    assert.deepEqual({ ...queue[0], name: undefined }, { name: undefined, type: 'queueTrigger', direction: 'in', queueName: 'jobs', connection: 'AzureWebJobsStorage' });

    const timer = fns.tick.bindings;
    assert.equal(timer.length, 1);
    assert.deepEqual({ ...timer[0], name: undefined }, { name: undefined, type: 'timerTrigger', direction: 'in', schedule: '0 */5 * * * *', runOnStartup: true, useMonitor: false });
    const retry = fns.tick.retry_options;
    assert.equal(retry.retry_strategy, 'fixed_delay');
    assert.equal(retry.max_retry_count, 3);
    assert.equal(Number(retry.delay_interval.seconds), 10);
    assert.equal(fns.hello.retry_options, null);
  });

  test('a second metadata request answers the same without loading the files again', async () => {
    const again = byName(await host.metadata());
    assert.deepEqual(Object.keys(again).sort(), Object.keys(fns).sort());
  });

  test('http: request in, response with status, headers, cookies and body out; hooks ran', async () => {
    const triggerName = fns.hello.bindings.find((b) => b.type === 'httpTrigger').name;
    const r = ok(await host.invoke('hello', {
      input_data: [{ name: triggerName, data: typed.http({
        method: 'POST', url: 'http://localhost/api/hello/ada?x=1', headers: { 'x-test': 'T', 'content-type': 'text/plain' },
        query: { x: '1' }, params: { name: 'ada' }, body: 'payload',
      }) }],
      trigger_metadata: { name: typed.string('ada') },
    }, 20000));
    const res = decode(r.return_value);
    assert.equal(res.kind, 'http');
    assert.equal(res.status, 201);
    assert.equal(res.headers['x-out'], 'yes');
    assert.equal(res.headers['x-hook'], 'post saw hello');
    assert.match(res.headers['content-type'], /application\/json/);
    assert.deepEqual(res.setCookies, ['session=abc; Path=/; HttpOnly; SameSite=Lax']);
    const body = JSON.parse(Buffer.from(res.body.value).toString('utf8'));
    assert.equal(body.name, 'ada');
    assert.equal(body.q, '1');
    assert.equal(body.h, 'T');
    assert.equal(body.body, 'payload');
    assert.equal(body.method, 'POST');
    assert.equal(body.url, 'http://localhost/api/hello/ada?x=1');
    assert.equal(body.appStarted, true);
    assert.equal(body.functionName, 'hello');
    assert.equal(body.invocationId, r.invocation_id);
    const userLogs = host.logsFor(r.invocation_id).filter((l) => l.category === 'Function.hello.User');
    assert.ok(userLogs.some((l) => l.message === 'hello from ada'), JSON.stringify(userLogs));
  });

  test('blob trigger: trigger and input blobs as Buffers, output via extraOutputs', async () => {
    const bindings = fns.copyBlob.bindings;
    const trig = bindings.find((b) => b.type === 'blobTrigger').name;
    const input = bindings.find((b) => b.type === 'blob' && b.direction === 'in').name;
    const out = bindings.find((b) => b.type === 'blob' && b.direction === 'out').name;
    const r = ok(await host.invoke('copyBlob', {
      input_data: [{ name: trig, data: typed.blob('DATA', 'in/a.txt') }, { name: input, data: typed.blob('REF', 'refs/a.txt') }],
      trigger_metadata: { name: typed.string('a.txt'), BlobTrigger: typed.string('in/a.txt') },
    }, 20000));
    assert.equal(r.output_data.length, 1);
    assert.equal(r.output_data[0].name, out);
    const value = decode(r.output_data[0].data);
    assert.equal(value.kind, 'bytes');
    assert.equal(value.value.toString(), 'buf:DATA|REF|a.txt');
    assert.ok(!r.return_value || !r.return_value.data, 'no $return binding: no return value');
  });

  test('a handler that throws fails the invocation with its message', async () => {
    const triggerName = fns.boom.bindings.find((b) => b.type === 'httpTrigger').name;
    const r = await host.invoke('boom', { input_data: [{ name: triggerName, data: typed.http({ url: 'http://localhost/api/boom' }) }] }, 20000);
    assert.equal(r.result.status, 'FAILURE');
    assert.match(r.result.exception.message, /kaboom in handler/);
    assert.equal(r.result.exception.source, 'boom');
  });
});

describe('node v4 indexing failures', () => {
  async function indexOf(files) {
    const host = await startV4(files);
    try {
      return await host.metadata();
    } finally {
      await host.stop();
    }
  }

  test('a main glob that matches nothing', async () => {
    const reply = await indexOf({ 'package.json': JSON.stringify({ main: 'dist/src/functions/*.js' }), 'src/functions/a.js': '' });
    assert.equal(reply.result.status, 'FAILURE');
    assert.match(reply.result.result, /"main" 'dist\/src\/functions\/\*\.js' matches no file/);
    assert.equal(reply.use_default_metadata_indexing, false);
    assert.equal(reply.function_metadata_results.length, 0);
  });

  test('a file that throws at require names the file and the error', async () => {
    const reply = await indexOf({
      'package.json': JSON.stringify({ main: 'src/*.js' }),
      'src/a.js': `require('@azure/functions').app.http('fine', { handler: async () => ({}) });`,
      'src/b.js': 'throw new TypeError("bad config in b");',
    });
    assert.equal(reply.result.status, 'FAILURE');
    assert.match(reply.result.result, /failed to load '.*\/src\/b\.js'.*TypeError: bad config in b/);
  });

  test('two functions with one name name both files', async () => {
    const reply = await indexOf({
      'package.json': JSON.stringify({ main: 'src/*.js' }),
      'src/a.js': `require('@azure/functions').app.http('same', { handler: async () => ({}) });`,
      'src/b.js': `require('@azure/functions').app.storageQueue('Same', { queueName: 'q', connection: 'c', handler: async () => {} });`,
    });
    assert.equal(reply.result.status, 'FAILURE');
    assert.match(reply.result.result, /two functions are named 'Same': registered in 'src\/a\.js' and in 'src\/b\.js'/);
  });

  test('files that register nothing', async () => {
    const reply = await indexOf({ 'package.json': JSON.stringify({ main: 'index.js' }), 'index.js': 'module.exports = 1;' });
    assert.equal(reply.result.status, 'FAILURE');
    assert.match(reply.result.result, /no function was registered .*'index\.js'/);
  });
});

describe('node v4 ES module app', () => {
  test('"type": "module" files are imported; their registrations are indexed and run', async (t) => {
    const host = await startV4({
      'package.json': JSON.stringify({ type: 'module', main: 'src/functions/*.js' }),
      'src/functions/hi.js': `import { app } from '@azure/functions';
app.http('esmHi', { methods: ['GET'], handler: async (request) => ({ body: 'esm hi ' + request.query.get('who') }) });`,
    });
    t.after(() => host.stop());
    const reply = await host.metadata();
    assert.equal(reply.result.status, 'SUCCESS', reply.result.result);
    const md = byName(reply).esmHi;
    assert.equal(md.script_file, path.join(host.appDir, 'src/functions/hi.js'));
    ok(await host.load(md.function_id, { name: md.name, script_file: md.script_file, directory: md.directory }));
    const trig = md.bindings.find((b) => b.type === 'httpTrigger').name;
    const r = ok(await host.invoke(md.function_id, { input_data: [{ name: trig, data: typed.http({ url: 'http://localhost/api/esmHi?who=you', query: { who: 'you' } }) }] }, 20000));
    const res = decode(r.return_value);
    assert.equal(res.status, 200);
    assert.equal(Buffer.from(res.body.value).toString(), 'esm hi you');
  });
});

describe('v3 app beside v4 support', () => {
  let host;
  before(async () => {
    host = await startV4({
      // npm init's default main, which a v3 app often has and does not contain.
      'package.json': JSON.stringify({ name: 'v3app', main: 'index.js' }),
      'HttpV3/function.json': JSON.stringify({ bindings: [{ type: 'httpTrigger', direction: 'in', name: 'req' }, { type: 'http', direction: 'out', name: 'res' }] }),
      'HttpV3/index.js': `module.exports = async function (context, req) { context.res = { status: 200, body: 'v3 says ' + req.query.who }; };`,
    });
  });
  after(() => host && host.stop());

  test('metadata asks for function.json indexing; the v3 function loads and runs as before', async () => {
    const reply = await host.metadata();
    assert.equal(reply.result.status, 'SUCCESS', reply.result.result);
    assert.equal(reply.use_default_metadata_indexing, true);
    assert.equal(reply.function_metadata_results.length, 0);
    ok(await host.load('f1', { name: 'HttpV3', script_file: 'HttpV3/index.js', bindings: {
      req: { type: 'httpTrigger', direction: 'IN' }, res: { type: 'http', direction: 'OUT' },
    } }));
    const r = ok(await host.invoke('f1', { input_data: [{ name: 'req', data: typed.http({ query: { who: 'me' } }) }] }));
    const res = decode(r.output_data.find((o) => o.name === 'res').data);
    assert.equal(res.status, 200);
    assert.equal(res.body.value, 'v3 says me');
  });
});

describe('node v4: shared memory, other triggers, log and terminate hooks', () => {
  const BIG = 'x'.repeat(4000);
  const FILES = {
    'package.json': JSON.stringify({ main: 'functions.js' }),
    'functions.js': `const { app, input, output } = require('@azure/functions');
const fs = require('fs');
const text = input.storageBlob({ path: 'refs/{name}', connection: 'AzureWebJobsStorage', dataType: 'string' });
const big = output.storageBlob({ path: 'out/{name}', connection: 'AzureWebJobsStorage' });
app.storageBlob('bigCopy', {
  path: 'in/{name}', connection: 'AzureWebJobsStorage', extraInputs: [text], extraOutputs: [big],
  handler: async (blob, context) => {
    const t = context.extraInputs.get(text);
    context.extraOutputs.set(big, Buffer.concat([blob, Buffer.from('|' + typeof t + ':' + t.length)]));
  },
});
app.storageQueue('q', { queueName: 'jobs', connection: 'AzureWebJobsStorage', return: output.storageQueue({ queueName: 'done', connection: 'AzureWebJobsStorage' }),
  handler: async (message, context) => ({ got: message, id: context.triggerMetadata.id, secret: 'secret-token' }) });
app.timer('tick', { schedule: '*/10 * * * * *', handler: async (timer, context) => {
  context.log('past due:', timer.isPastDue, 'last:', timer.scheduleStatus && timer.scheduleStatus.last, 'secret-token');
} });
app.hook.log((context) => {
  if (context.category === 'user') { context.message = context.message.replace('secret-token', '[hidden]'); context.level = 'warning'; }
});
app.hook.appTerminate(() => { fs.writeFileSync('terminated.txt', 'bye'); });
`,
  };
  let host;
  before(async () => {
    host = await startV4(FILES, {});
    // No FunctionsMetadataRequest: a worker the host starts after another indexed the app. The
    // function ids are what the first worker reported (the function names).
    for (const name of ['bigCopy', 'q', 'tick']) {
      ok(await host.load(name, { name, script_file: 'functions.js', directory: '.' }));
    }
  });
  after(() => host && host.stop());

  test('concurrent loads without a metadata request wait for the whole app to be indexed', async (t) => {
    const h = await startV4({
      'package.json': JSON.stringify({ main: 'src/*.mjs' }),
      'src/a.mjs': `import { app } from '@azure/functions'; app.http('first', { handler: async () => ({ body: 'a' }) });`,
      'src/b.mjs': `import { app } from '@azure/functions'; await new Promise((r) => setTimeout(r, 50));
app.http('second', { handler: async () => ({ body: 'b' }) });`,
    });
    t.after(() => h.stop());
    const [a, b] = await Promise.all([
      h.load('first', { name: 'first', script_file: 'src/a.mjs', directory: '.' }),
      h.load('second', { name: 'second', script_file: 'src/b.mjs', directory: '.' }),
    ]);
    ok(a);
    ok(b);
  });

  test('a load of a function the app did not register fails naming what was registered', async () => {
    const r = await host.load('nope', { name: 'nope', script_file: 'functions.js', directory: '.' });
    assert.equal(r.result.status, 'FAILURE');
    assert.equal(r.result.exception.message, "Function 'nope' (id 'nope') was not registered by the app (registered: bigCopy, q, tick)");
  });

  test('blob from shared memory in, big output to shared memory, string dataType input', async (t) => {
    const shmHost = await startV4(FILES, {});
    t.after(() => shmHost.stop());
    // A second host with shared memory offered: the worker negotiates it at reload.
    const caps = shmHost.shmCapabilities(1024);
    const reload = await shmHost.reload({ ...process.env }, { capabilities: caps });
    assert.equal(reload.result.status, 'SUCCESS');
    assert.equal(reload.capabilities.shared_memory, '1');
    const md = byName(await shmHost.metadata()).bigCopy;
    ok(await shmHost.load(md.function_id, { name: md.name, script_file: md.script_file, directory: md.directory }));
    const payload = Buffer.from(BIG);
    const segment = 'l77';
    fs.writeFileSync(path.join(caps.shared_memory_dir, segment), Buffer.concat([Buffer.alloc(100, 0xee), payload]));
    const trig = md.bindings.find((b) => b.type === 'blobTrigger').name;
    const textName = md.bindings.find((b) => b.type === 'blob' && b.direction === 'in').name;
    assert.equal(md.bindings.find((b) => b.name === textName).dataType, 'string');
    const r = ok(await shmHost.invoke('bigCopy', {
      input_data: [{ name: trig, data: typed.shmBlob(segment, 100, payload.length, 'in/big.txt') }, { name: textName, data: typed.blob('żółw', 'refs/big.txt') }],
      trigger_metadata: { name: typed.string('big.txt') },
    }, 20000));
    const out = r.output_data[0].data;
    assert.equal(out.data, 'blob');
    const ref = out.blob.shared_memory;
    const written = fs.readFileSync(path.join(caps.shared_memory_dir, ref.segment));
    assert.equal(written.toString(), `${BIG}|string:4`);
    assert.equal(Number(ref.length), written.length);
  });

  test('queue trigger: message and trigger metadata in, $return queue output', async () => {
    const r = ok(await host.invoke('q', {
      input_data: [{ name: await triggerName(host, 'q'), data: typed.json({ job: 7 }) }],
      trigger_metadata: { Id: typed.string('m-1'), DequeueCount: typed.json(1) },
    }, 20000));
    assert.deepEqual(decode(r.return_value).value, { got: { job: 7 }, id: 'm-1', secret: 'secret-token' });
  });

  test('timer trigger: the payload arrives camelCased; log hooks change level and message', async () => {
    const r = ok(await host.invoke('tick', {
      input_data: [{ name: await triggerName(host, 'tick'), data: typed.json({ Schedule: { AdjustForDST: true }, ScheduleStatus: { Last: '2026-01-01T00:00:00Z', Next: '2026-01-01T00:00:10Z', LastUpdated: '2026-01-01T00:00:00Z' }, IsPastDue: true }) }],
    }, 20000));
    const logs = host.logsFor(r.invocation_id).filter((l) => l.category === 'Function.tick.User');
    assert.equal(logs.length, 1, JSON.stringify(logs));
    assert.equal(logs[0].message, 'past due: true last: 2026-01-01T00:00:00Z [hidden]');
    assert.equal(logs[0].level, 'WARNING');
  });

  test('appTerminate hooks run at WorkerTerminate, before the worker exits', async () => {
    const h = await startV4(FILES, {});
    try {
      assert.equal((await h.metadata()).result.status, 'SUCCESS');
      h.terminate(10000);
      const exit = await h.waitExit(20000);
      assert.equal(exit.code, 0);
      assert.equal(fs.readFileSync(path.join(h.appDir, 'terminated.txt'), 'utf8'), 'bye');
    } finally {
      await h.stop();
    }
  });

  test('HTTP streaming is refused at indexing with a reason', async () => {
    const h = await startV4({
      'package.json': JSON.stringify({ main: 'index.js' }),
      'index.js': `const { app } = require('@azure/functions'); app.setup({ enableHttpStream: true }); app.http('s', { handler: async () => ({}) });`,
    });
    try {
      const reply = await h.metadata();
      assert.equal(reply.result.status, 'FAILURE');
      assert.match(reply.result.result, /HTTP streaming .*enableHttpStream.* is not supported/);
    } finally {
      await h.stop();
    }
  });
});

// FaaST's conditional blob outputs: the host validates and enforces "ifMatch" (the name of a blob input of the same
// function); the library spreads an output's options into its binding and the worker passes every key through.
describe('node v4: a blob output\'s ifMatch', () => {
  test('reaches the host as "ifMatch" naming the blob input, the library\'s generated name or one given', async () => {
    const h = await startV4({
      'package.json': JSON.stringify({ main: 'index.js' }),
      'index.js': `const { app, input, output } = require('@azure/functions');
const state = input.storageBlob({ path: 'jl/{session}/state.pkl', connection: 'AzureWebJobsStorage' });
const stateOut = output.storageBlob({ path: 'jl/{session}/state.pkl', connection: 'AzureWebJobsStorage', ifMatch: state.name });
const named = input.storageBlob({ name: 'before', path: 'jl/{session}/other', connection: 'AzureWebJobsStorage' });
const after = output.storageBlob({ path: 'jl/{session}/other', connection: 'AzureWebJobsStorage', ifMatch: 'before' });
app.http('execute', {
  methods: ['POST'],
  extraInputs: [state, named],
  extraOutputs: [stateOut, after],
  handler: async (request, context) => {
    context.extraOutputs.set(stateOut, context.extraInputs.get(state));
    return { body: 'ok' };
  },
});`,
    });
    try {
      const reply = await h.metadata();
      assert.equal(reply.result.status, 'SUCCESS', reply.result.result);
      const bindings = byName(reply).execute.bindings;
      const blobs = bindings.filter((b) => b.type === 'blob');
      const stateIn = blobs.find((b) => b.direction === 'in' && b.path === 'jl/{session}/state.pkl');
      const stateOut = blobs.find((b) => b.direction === 'out' && b.path === 'jl/{session}/state.pkl');
      assert.equal(stateOut.ifMatch, stateIn.name);
      assert.equal(stateIn.ifMatch, undefined);
      assert.equal(blobs.find((b) => b.direction === 'out' && b.path === 'jl/{session}/other').ifMatch, 'before');
      assert.ok(blobs.some((b) => b.direction === 'in' && b.name === 'before'));
    } finally {
      await h.stop();
    }
  });
});

// The trigger's binding name the library chose, from a metadata request.
async function triggerName(host, fnName) {
  const md = byName(await host.metadata())[fnName];
  return md.bindings.find((b) => b.direction === 'in' && /trigger$/i.test(b.type)).name;
}
