'use strict';
// An in-test stand-in for the FaaST host: a real gRPC server implementing
// WorkerChannel.EventStream from protos/worker.proto, which launches the real worker.js
// as a child process exactly as the host does (cwd = app dir, --host/--port/--worker-id).
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawn } = require('child_process');
const grpc = require('@grpc/grpc-js');
const { loadProto } = require('../lib/proto');

const WORKER_JS = path.resolve(__dirname, '..', 'worker.js');
const SHM_MIN_BYTES = 1024;

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

function writeApp(dir, files) {
  for (const [rel, content] of Object.entries(files || {})) {
    const file = path.join(dir, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, content);
  }
}

class FakeHost {
  constructor() {
    this.call = null;
    this.workerId = `test-worker-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    this.pending = new Map();   // request_id / invocation_id -> resolve
    this.logs = [];             // every RpcLog received
    this.received = [];         // every message received
    this.stdout = '';
    this.stderr = '';
    this.nextId = 1;
    this.streamEnded = false;
    this.onConnected = null;
    this.connected = new Promise((resolve) => { this.onConnected = resolve; });
    this.streamEndedPromise = new Promise((resolve) => { this.onStreamEnded = resolve; });
  }

  async start({ files, env, extraArgs, nodeArgs, cwd, spawnWorker = true } = {}) {
    this.appDir = fs.mkdtempSync(path.join(os.tmpdir(), 'faast-node-test-'));
    writeApp(this.appDir, files);
    const proto = loadProto();
    this.server = new grpc.Server({
      'grpc.max_send_message_length': 256 * 1024 * 1024,
      'grpc.max_receive_message_length': 256 * 1024 * 1024,
    });
    this.server.addService(proto.WorkerChannel.service, { EventStream: (call) => this.accept(call) });
    this.port = await new Promise((resolve, reject) => {
      this.server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) reject(err); else resolve(port);
      });
    });
    if (spawnWorker) this.spawnWorker({ env, extraArgs, nodeArgs, cwd });
    return this;
  }

  // cwd: the worker's directory (default the app's; a standby worker starts elsewhere).
  spawnWorker({ env, extraArgs, nodeArgs, argv, cwd } = {}) {
    const args = argv || [...(nodeArgs || []), WORKER_JS, '--host', '127.0.0.1', '--port', String(this.port), '--worker-id', this.workerId, ...(extraArgs || [])];
    this.child = spawn(process.execPath, args, {
      cwd: cwd || this.appDir,
      env: { ...process.env, ...(env || {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout.setEncoding('utf8').on('data', (d) => { this.stdout += d; });
    this.child.stderr.setEncoding('utf8').on('data', (d) => { this.stderr += d; });
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() }));
    });
    return this.child;
  }

  accept(call) {
    this.call = call;
    call.on('data', (msg) => this.receive(msg));
    call.on('end', () => { this.streamEnded = true; this.onStreamEnded(); try { call.end(); } catch { /* closed */ } });
    call.on('error', () => { this.streamEnded = true; this.onStreamEnded(); });
  }

  receive(msg) {
    this.received.push(msg);
    switch (msg.content) {
      case 'start_stream':
        this.startStream = msg.start_stream;
        this.onConnected(msg.start_stream);
        break;
      case 'rpc_log':
        this.logs.push(msg.rpc_log);
        break;
      case 'worker_init_response':
      case 'function_environment_reload_response':
      case 'function_load_response':
      case 'function_metadata_response':
        this.settle(msg.request_id, msg);
        break;
      case 'invocation_response':
        this.settle(msg.invocation_response.invocation_id, msg.invocation_response);
        break;
      default:
        break;
    }
  }

  settle(id, value) {
    const resolve = this.pending.get(id);
    if (resolve) {
      this.pending.delete(id);
      resolve(value);
    }
  }

  expect(id, what, timeoutMs = 5000) {
    return withTimeout(new Promise((resolve) => this.pending.set(id, resolve)), timeoutMs, what);
  }

  send(msg) {
    this.call.write(msg);
  }

  async waitConnected(timeoutMs = 5000) {
    return withTimeout(this.connected, timeoutMs, 'StartStream');
  }

  // A fresh directory under /dev/shm, as the host creates for an app (removed by stop()).
  createShmDir() {
    this.shmDir = fs.mkdtempSync('/dev/shm/faast-node-test-');
    return this.shmDir;
  }

  // The capabilities a host with shared memory offers (creates the directory if needed).
  shmCapabilities(minBytes = SHM_MIN_BYTES) {
    const dir = this.shmDir || this.createShmDir();
    return { shared_memory: '1', shared_memory_dir: dir, shared_memory_min_bytes: String(minBytes) };
  }

  async init(capabilities = {}) {
    await this.waitConnected();
    const requestId = `init-${this.nextId++}`;
    const reply = this.expect(requestId, 'WorkerInitResponse');
    this.send({ request_id: requestId, worker_init_request: { host_version: 'test', capabilities, function_app_directory: this.appDir } });
    return reply;
  }

  // FunctionEnvironmentReloadRequest: specialise the worker to the app in dir (default: the app dir).
  async reload(env, { dir, capabilities = {} } = {}) {
    const requestId = `reload-${this.nextId++}`;
    const reply = this.expect(requestId, 'FunctionEnvironmentReloadResponse');
    this.send({
      request_id: requestId,
      function_environment_reload_request: { environment_variables: env, function_app_directory: dir === undefined ? this.appDir : dir, capabilities },
    });
    return (await reply).function_environment_reload_response;
  }

  // metadata.script_file / directory may be relative to the app dir.
  async load(functionId, metadata) {
    const md = { ...metadata };
    md.directory = path.resolve(this.appDir, md.directory || path.dirname(md.script_file || '.'));
    if (md.script_file) md.script_file = path.resolve(this.appDir, md.script_file);
    const requestId = `load-${this.nextId++}`;
    const reply = this.expect(requestId, `FunctionLoadResponse for ${functionId}`);
    this.send({ request_id: requestId, function_load_request: { function_id: functionId, metadata: md } });
    return (await reply).function_load_response;
  }

  // FunctionsMetadataRequest for the app dir (or `dir`): the FunctionMetadataResponse.
  async metadata({ dir, timeoutMs = 30000 } = {}) {
    const requestId = `metadata-${this.nextId++}`;
    const reply = this.expect(requestId, 'FunctionMetadataResponse', timeoutMs);
    this.send({ request_id: requestId, functions_metadata_request: { function_app_directory: dir === undefined ? this.appDir : dir } });
    return (await reply).function_metadata_response;
  }

  // Returns the InvocationResponse; logs for it are in logsFor(invocationId).
  invoke(functionId, { input_data = [], trigger_metadata = {}, invocation_id } = {}, timeoutMs = 5000) {
    const invocationId = invocation_id || `inv-${this.nextId++}`;
    const reply = this.expect(invocationId, `InvocationResponse ${invocationId}`, timeoutMs);
    this.send({ invocation_request: { invocation_id: invocationId, function_id: functionId, input_data, trigger_metadata } });
    return reply;
  }

  logsFor(invocationId) {
    return this.logs.filter((l) => l.invocation_id === invocationId);
  }

  terminate(gracePeriodMs) {
    this.send({ worker_terminate: { grace_period_ms: gracePeriodMs } });
  }

  // The host side finishing the stream (as when the host shuts its channel down).
  closeStream() {
    this.call.end();
  }

  waitExit(timeoutMs = 5000) {
    return withTimeout(this.exited, timeoutMs, 'worker exit');
  }

  async stop() {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
    if (this.server) this.server.forceShutdown();
    if (this.appDir) fs.rmSync(this.appDir, { recursive: true, force: true });
    if (this.shmDir) fs.rmSync(this.shmDir, { recursive: true, force: true });
  }
}

// CPU time (ms) of every thread of a process (main, JIT compiler, GC helpers, libuv pool),
// from /proc/<pid>/task/*/schedstat: nanoseconds, unlike the 10 ms ticks of /proc/<pid>/stat.
function processCpuMs(pid) {
  let ns = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    } catch { /* the thread just exited */ }
  }
  return ns / 1e6;
}

async function startHost(options) {
  const host = new FakeHost();
  try {
    await host.start(options);
  } catch (err) {
    await host.stop();
    throw err;
  }
  return host;
}

// TypedData builders.
const typed = {
  string: (s) => ({ string: s }),
  json: (v) => ({ json: JSON.stringify(v) }),
  bytes: (b) => ({ bytes: Buffer.from(b) }),
  none: () => ({}),
  http: ({ method = 'GET', url = 'http://localhost/api/x', headers = {}, query = {}, params = {}, body } = {}) => ({
    http: { method, url, headers, query, params, ...(body === undefined ? {} : { body: { bytes: Buffer.from(body) } }) },
  }),
  blob: (content, name = 'container/blob.bin') => ({ blob: { name, uri: `http://127.0.0.1/${name}`, length: Buffer.byteLength(content), etag: '"0x1"', bytes: Buffer.from(content) } }),
  // A blob in a shared-memory segment, as the cachelet sends it.
  shmBlob: (segment, offset, length, name = 'container/cached.bin') => ({ blob: {
    name, uri: `http://127.0.0.1/${name}`, length, etag: '"0x8D1"',
    shared_memory: { segment, offset, length, version: '"0x8D1"' },
  } }),
};

// Paths a process has open (/proc/<pid>/fd).
function openPaths(pid) {
  const out = [];
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try { out.push(fs.readlinkSync(`/proc/${pid}/fd/${fd}`)); } catch { /* closed meanwhile */ }
  }
  return out;
}

// Decodes a TypedData received from the worker into { kind, value }.
function decode(td) {
  if (!td || !td.data) return { kind: 'none', value: null };
  switch (td.data) {
    case 'string': return { kind: 'string', value: td.string };
    case 'json': return { kind: 'json', value: JSON.parse(td.json) };
    case 'bytes': return { kind: 'bytes', value: Buffer.from(td.bytes) };
    case 'http': {
      const h = td.http;
      return { kind: 'http', status: h.status_code, headers: h.headers, setCookies: h.set_cookies || [], body: decode(h.body) };
    }
    default: return { kind: td.data, value: td[td.data] };
  }
}

module.exports = { startHost, FakeHost, typed, decode, processCpuMs, openPaths, WORKER_JS, withTimeout, SHM_MIN_BYTES };
