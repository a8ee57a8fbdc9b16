'use strict';
// Times @azure/functions 4.x's own calls on the worker's exact inputs, in this process (no host, no
// gRPC), beside the same work on plain objects as the v3 path does it:
//   node workers/node/bench/v4-library.js [iterations=20000] [sparse=400]
// The input is the bench no-op's InvocationRequest (bench/noop.js, `./faast bench runtime`) round-tripped
// through the worker's protobuf decoder; the handler returns { body: 'ok' }. Per variant:
//   hot_us: mean over `iterations` calls back to back (after warm-up), garbage collection included;
//   sparse_us: median of `sparse` single calls 1 ms apart, as an idle worker sees requests one by one.
// Variants: the library given what the worker gave it before (native: off, the library builds an undici
// Request and reads a Response back), the library given the worker's lazy request / plain response
// (native: on, lib/v4-http.js), and the v3 worker's conversions of the same request and response.
const path = require('path');
const { performance } = require('perf_hooks');
const protoLoader = require('@grpc/proto-loader');
const grpc = require('@grpc/grpc-js');
const { PROTO_PATH, LOADER_OPTIONS } = require('../lib/proto');
const { V4State, toRpcRequest } = require('../lib/v4');
const v4http = require('../lib/v4-http');
const { fromTypedData, toHttpTypedData } = require('../lib/converters');
const { typed } = require('../test-support/fake-host');

const ITER = Number(process.argv[2] || 20000);
const SPARSE = Number(process.argv[3] || 400);
const V4_LIB = path.resolve(__dirname, '..', 'test-support', 'v4-deps', 'node_modules', '@azure', 'functions');

const headers = {
  host: 'localhost:7071', 'user-agent': 'bench/1.0', accept: '*/*', 'accept-encoding': 'gzip',
  connection: 'keep-alive', 'x-request-id': 'abc123', 'x-forwarded-for': '10.0.0.1', 'content-length': '0',
};

// The InvocationRequest as the worker's gRPC stream decodes it.
function decodedRequest(triggerName) {
  const def = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
  const svc = grpc.loadPackageDefinition(def).faast.worker.v1.WorkerChannel.service.EventStream;
  const msg = {
    request_id: 'r1',
    invocation_request: {
      invocation_id: 'inv-1',
      function_id: 'noop',
      input_data: [{ name: triggerName, data: typed.http({ method: 'GET', url: 'http://localhost:7071/api/noop?name=x', headers, query: { name: 'x' } }) }],
      trigger_metadata: { Query: typed.json({ name: 'x' }), Headers: typed.json(headers) },
    },
  };
  return svc.requestDeserialize(svc.requestSerialize(msg)).invocation_request;
}

function setup() {
  const channel = { workerLog() {}, log() {}, shm: null };
  const state = new V4State(channel);
  state.install();
  const lib = require(V4_LIB);
  lib.app.http('noop', { methods: ['GET'], authLevel: 'anonymous', handler: async () => ({ body: 'ok' }) });
  const reg = state.registrations[0];
  state.toRpcMetadata(reg, process.cwd());
  const fn = state.loaded('noop', reg);
  return { state, fn, native: v4http.probe(lib) };
}

async function main() {
  const { state, fn, native } = setup();
  // app.http names its trigger binding (httpTrigger<hash>); the host sends the request under that name.
  const request = decodedRequest(Object.keys(fn.bindings).find((k) => fn.bindings[k].type === 'httpTrigger'));
  if (!native.request || !native.response) throw new Error(`the library at ${V4_LIB} does not take nativeRequest/nativeResponse (${JSON.stringify(native)})`);
  const on = { request: true, response: true };
  const off = { request: false, response: false };
  const coreCtx = (rpc) => ({
    invocationId: request.invocation_id,
    request: rpc,
    metadata: { name: fn.name, bindings: fn.bindings, directory: '.', scriptFile: undefined },
    state: undefined,
    log() {},
  });
  const result = { body: 'ok' };
  const v3Handler = async () => ({ body: 'ok' });
  let model;
  let ctx;
  const variants = {
    // Ours -> Azure's RpcInvocationRequest shape (the worker's own conversion).
    worker_toRpcRequest: () => { state.native = off; toRpcRequest(request, fn.bindings, null, state); },
    // The library's getArguments (HttpRequest + InvocationContext), on what the worker handed it before ...
    library_getArguments_native_off: async () => {
      state.native = off;
      model = state.model.getInvocationModel(coreCtx(toRpcRequest(request, fn.bindings, null, state)));
      ctx = (await model.getArguments()).context;
    },
    // ... and on the worker's lazy request.
    library_getArguments_native_on: async () => {
      state.native = on;
      model = state.model.getInvocationModel(coreCtx(toRpcRequest(request, fn.bindings, null, state)));
      ctx = (await model.getArguments()).context;
    },
    // The library's getResponse of { body: 'ok' } (its HttpResponse on an undici Response, read back) ...
    library_getResponse_native_off: async () => { await model.getResponse(ctx, result); },
    // ... and of the worker's plain response.
    library_getResponse_native_on: async () => { await model.getResponse(ctx, v4http.plainResponse(result)); },
    // The v3 worker on the same request and response: a plain req object, and the response's TypedData.
    v3_request_plain: () => { fromTypedData(request.input_data[0].data, 'UNDEFINED', null); },
    v3_response_plain: () => { toHttpTypedData(result); },
    // One whole invocation as runV4Invocation drives the library (no hooks), before and now ...
    library_invocation_native_off: async () => {
      state.native = off;
      const m = state.model.getInvocationModel(coreCtx(toRpcRequest(request, fn.bindings, null, state)));
      const args = await m.getArguments();
      const r = await m.invokeFunction(args.context, args.inputs, fn.reg.callback);
      await m.getResponse(args.context, r);
    },
    library_invocation_native_on: async () => {
      state.native = on;
      const m = state.model.getInvocationModel(coreCtx(toRpcRequest(request, fn.bindings, null, state)));
      const args = await m.getArguments();
      const r = await m.invokeFunction(args.context, args.inputs, fn.reg.callback);
      await m.getResponse(args.context, v4http.plainResponse(r));
    },
    // ... and the v3 worker's work for the same: the request's TypedData to a plain req, the handler, the response.
    v3_invocation_plain: async () => {
      const req = fromTypedData(request.input_data[0].data, 'UNDEFINED', null);
      toHttpTypedData(await v3Handler({}, req));
    },
    // An undici Request / Response alone, as the library builds them (what native: on skips).
    undici_new_Request: () => { v4http.buildRequest({ method: 'GET', url: request.input_data[0].data.http.url, headers: { ...headers } }); },
    undici_Response_arrayBuffer: async () => { await new Response('ok').arrayBuffer(); },
  };
  // getResponse needs a model and context from getArguments.
  await variants.library_getArguments_native_off();
  const out = { node: process.version, library: require(path.join(V4_LIB, 'package.json')).version, iterations: ITER, sparse: SPARSE, results: {} };
  for (const [name, f] of Object.entries(variants)) {
    for (let i = 0; i < Math.min(5000, ITER); i++) await f(); // warm-up (JIT)
    const t0 = performance.now();
    for (let i = 0; i < ITER; i++) await f();
    const hot = ((performance.now() - t0) * 1000) / ITER;
    const samples = [];
    for (let i = 0; i < SPARSE; i++) {
      await new Promise((r) => { setTimeout(r, 1); });
      const s = performance.now();
      await f();
      samples.push((performance.now() - s) * 1000);
    }
    samples.sort((a, b) => a - b);
    out.results[name] = { hot_us: Number(hot.toFixed(1)), sparse_us: Number(samples[samples.length >> 1].toFixed(1)) };
  }
  // The two paths give the host the same response.
  const a = await model.getResponse(ctx, result);
  const b = await model.getResponse(ctx, v4http.plainResponse(result));
  out.same_response = JSON.stringify(a) === JSON.stringify(b);
  console.log(JSON.stringify(out, null, 1));
}

main().catch((err) => { console.error(err); process.exit(1); });
