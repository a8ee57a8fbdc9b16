'use strict';
// lib/v4-http.js against the real @azure/functions (test-support/v4-deps), in this process: the lazy
// request and the plain response give the library's handler and the host exactly what the library's
// own undici Request/Response path gives, and the worker uses them only where the library takes them.
const { describe, test, before } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const os = require('os');
const { V4State, toRpcRequest, probeLibrary } = require('../lib/v4');
const v4http = require('../lib/v4-http');

const V4_DEPS = path.resolve(__dirname, '..', 'test-support', 'v4-deps');
const LIB = path.join(V4_DEPS, 'node_modules', '@azure', 'functions');

let state;
let lib;
let logs;
let seen; // what the last handler saw
let fn;

before(() => {
  // ./faast setup installs these; a bare `node --test` checkout installs them here (npm ci, pinned).
  if (!fs.existsSync(path.join(LIB, 'package.json'))) {
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: V4_DEPS, stdio: 'inherit' });
  }
  logs = [];
  state = new V4State({ workerLog: (level, message) => logs.push({ level, message }), log() {}, shm: null });
  state.install();
  lib = require(LIB);
  lib.app.http('echo', {
    methods: ['GET', 'POST', 'HEAD', 'PUT'],
    authLevel: 'anonymous',
    handler: async (request) => {
      seen = request;
      return { body: 'ok' };
    },
  });
  const reg = state.registrations[0];
  state.toRpcMetadata(reg, process.cwd());
  fn = state.loaded('echo', reg);
});

function triggerName() {
  return Object.keys(fn.bindings).find((k) => fn.bindings[k].type === 'httpTrigger');
}

// The InvocationRequest as the worker decodes it (proto-loader: keepCase, oneofs).
function invocation({ method = 'GET', url = 'http://localhost:7071/api/echo?x=1&y=2', headers = {}, query = { x: '1', y: '2' }, body } = {}) {
  const http = { method, url, headers, query, params: { id: '7' } };
  if (body !== undefined) http.body = typeof body === 'string' ? { data: 'string', string: body } : { data: 'bytes', bytes: Buffer.from(body) };
  return {
    invocation_id: 'inv-1',
    function_id: 'echo',
    input_data: [{ name: triggerName(), data: { data: 'http', http } }],
    trigger_metadata: {},
  };
}

// The library's getArguments on what the worker hands it, with the lazy request (native) or without.
async function argumentsFor(request, native) {
  state.native = { request: native, response: native };
  const coreCtx = {
    invocationId: request.invocation_id,
    request: toRpcRequest(request, fn.bindings, null, state),
    metadata: { name: fn.name, bindings: fn.bindings, directory: '.', scriptFile: undefined },
    state: undefined,
    log() {},
  };
  const model = state.model.getInvocationModel(coreCtx);
  const { context, inputs } = await model.getArguments();
  return { model, context, request: inputs[0], rpc: coreCtx.request };
}

async function readRequest(req) {
  const clone = req.clone();
  return {
    url: req.url,
    method: req.method,
    headers: [...req.headers.entries()],
    query: [...req.query.entries()],
    params: req.params,
    user: req.user,
    text: await req.text(),
    bodyUsed: req.bodyUsed,
    cloneText: await clone.text(),
  };
}

describe('node v4: the library is given a lazy request', () => {
  test('the app\'s @azure/functions 4.16 takes a built request and response (the probe says so)', () => {
    assert.deepEqual(v4http.probe(lib), { request: true, response: true });
  });

  test('a library without those init fields is driven as before (the probe says no)', () => {
    class HttpRequest { constructor(init) { this.url = init.url; this.method = init.method; } }
    class HttpResponse { constructor(init) { this.status = (init && init.status) || 200; } }
    assert.deepEqual(v4http.probe({ HttpRequest, HttpResponse }), { request: false, response: false });
    assert.deepEqual(v4http.probe({}), { request: false, response: false });
  });

  test('the worker finds the library the app loaded from the app\'s files; without one there it probes nothing', (t) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'faast-v4probe-'));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    fs.mkdirSync(path.join(dir, 'with', 'src'), { recursive: true });
    fs.mkdirSync(path.join(dir, 'without', 'src'), { recursive: true });
    fs.symlinkSync(path.join(V4_DEPS, 'node_modules'), path.join(dir, 'with', 'node_modules'));
    const reg = (app) => [{ scriptFile: path.join(dir, app, 'src', 'index.js') }];
    assert.deepEqual(probeLibrary(path.join(dir, 'with'), reg('with')), { request: true, response: true });
    assert.deepEqual(probeLibrary(path.join(dir, 'without'), reg('without')), { request: false, response: false });
  });

  test('a handler that does not read the request never builds an undici Request', async () => {
    const { rpc, model, context, request } = await argumentsFor(invocation(), true);
    await model.invokeFunction(context, [request], async () => ({ body: 'ok' }));
    const lazy = rpc.inputData[0].data.http.nativeRequest;
    assert.ok(lazy instanceof v4http.LazyRequest);
    assert.equal(lazy.built, null);
    assert.deepEqual([...request.query.entries()], [['x', '1'], ['y', '2']]);
    assert.equal(lazy.built, null, 'query and params come from the RPC request, not the Request');
  });

  for (const [what, spec] of [
    ['a GET with headers', { headers: { 'X-Test': 'a', accept: '*/*' } }],
    ['a POST with a string body', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hello' }],
    ['a PUT with a bytes body', { method: 'PUT', body: [0, 1, 2, 255] }],
    ['a POST with an empty string body', { method: 'POST', body: '' }],
    ['a GET whose body the library drops', { method: 'GET', body: 'dropped' }],
    ['a HEAD', { method: 'HEAD' }],
  ]) {
    test(`${what}: the handler reads the same url, method, headers, query, params and body as from the library's own Request`, async () => {
      const eager = await readRequest((await argumentsFor(invocation(spec), false)).request);
      logs.length = 0;
      const lazy = await readRequest((await argumentsFor(invocation(spec), true)).request);
      assert.deepEqual(lazy, eager);
    });
  }

  test('a GET with a body is reported as the library reports it', async () => {
    logs.length = 0;
    await argumentsFor(invocation({ method: 'GET', body: 'dropped' }), true);
    assert.deepEqual(logs, [{ level: 'WARNING', message: 'Discarding the body of the incoming GET request because GET and HEAD requests cannot have a body.' }]);
  });
});

describe('node v4: a plain result becomes the host\'s response without an undici Response', () => {
  const cookie = { name: 'session', value: 'abc', path: '/', httpOnly: true, sameSite: 'Lax', maxAge: 60 };
  const shapes = [
    ['a string body', { body: 'ok' }],
    ['an empty object', {}],
    ['an empty string body', { body: '' }],
    ['a status, headers and a body', { status: 201, headers: { 'X-A': ' padded ', 'Content-Type': 'text/html' }, body: '<p>x</p>' }],
    ['headers as pairs, one name twice', { headers: [['x-a', '1'], ['X-A', '2'], ['b', '3']], body: 'x' }],
    ['headers as a Headers', { headers: new Headers({ z: '1', a: '2' }), body: 'x' }],
    ['a jsonBody', { jsonBody: { a: 1, b: [true, null] } }],
    ['a jsonBody with its own content type and a body it wins over', { jsonBody: 'text', body: 'ignored', headers: { 'content-type': 'application/vnd.x+json' } }],
    ['a Buffer body', { body: Buffer.from([0, 1, 2, 255]) }],
    ['a Uint8Array view into a larger buffer', { body: new Uint8Array(Buffer.from('abcdef').buffer, 2, 3) }],
    ['204 with a body the library drops', { status: 204, body: 'dropped' }],
    ['304 with a jsonBody the library drops', { status: 304, jsonBody: { a: 1 } }],
    ['cookies and content negotiation', { body: 'c', cookies: [cookie], enableContentNegotiation: true }],
    ['a null body', { body: null }],
    ['a status of 599', { status: 599, body: 'x' }],
  ];
  for (const [what, result] of shapes) {
    test(`${what}: the same RPC response as the library's own conversion`, async () => {
      const { model, context } = await argumentsFor(invocation(), true);
      const plain = v4http.plainResponse(result);
      assert.ok(plain !== undefined, 'takes the plain path');
      const viaLibrary = await model.getResponse(context, result);
      const viaPlain = await model.getResponse(context, plain);
      assert.deepEqual(viaPlain, viaLibrary);
    });
  }

  for (const [what, result] of [
    ['an HttpResponse', () => new lib.HttpResponse({ body: 'x' })],
    ['a string', () => 'just text'],
    ['a status out of range', () => ({ status: 700 })],
    ['a status as a string', () => ({ status: '201' })],
    ['a null status (a RangeError from the library)', () => ({ status: null, body: 'x' })],
    ['a stream body', () => ({ body: new ReadableStream() })],
    ['a URLSearchParams body', () => ({ body: new URLSearchParams({ a: '1' }) })],
    ['an unknown key', () => ({ body: 'x', statusCode: 201 })],
    ['an invalid header name', () => ({ headers: { 'bad name': 'x' } })],
    ['a jsonBody JSON cannot encode', () => ({ jsonBody: { n: 1n } })],
    ['an instance of a class', () => new (class Res { constructor() { this.body = 'x'; } })()],
  ]) {
    test(`${what} goes to the library's own conversion`, () => {
      assert.equal(v4http.plainResponse(result()), undefined);
    });
  }

  test('a plain response read as a whole Response (what a newer library might read) matches the library\'s', async () => {
    const result = { status: 202, headers: { 'x-a': '1' }, body: 'body' };
    const own = new lib.HttpResponse(result);
    const plain = new lib.HttpResponse(v4http.plainResponse(result));
    for (const r of [own, plain]) assert.equal(r.bodyUsed, false);
    assert.deepEqual(
      { status: plain.status, headers: [...plain.headers.entries()], text: await plain.text() },
      { status: own.status, headers: [...own.headers.entries()], text: await own.text() },
    );
  });
});
