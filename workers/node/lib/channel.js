'use strict';
// The worker's side of WorkerChannel.EventStream: dial the host, handshake, dispatch
// requests, and make sure the process never outlives its host.
const fs = require('fs');
const path = require('path');
const util = require('util');
const grpc = require('@grpc/grpc-js');
const { loadProto } = require('./proto');
const { loadFunction, LoadError } = require('./loader');
const { runInvocation, failureResponse } = require('./invocation');
const shmModule = require('./shm');
const { V4State, runV4Invocation } = require('./v4');
const { performance } = require('perf_hooks');

const WORKER_VERSION = '1.0.0';
const WORKER_CATEGORY = 'Worker.Node';
const DEFAULT_MAX_MESSAGE_LENGTH = 256 * 1024 * 1024;
const SUCCESS = Object.freeze({ status: 'SUCCESS' });
// Offered at init with a report interval in ms (protos/worker.proto, WorkerLoad).
const EVENT_LOOP_CAPABILITY = 'event_loop_utilization';

class WorkerChannel {
  constructor({ host, port, workerId, maxMessageLength, connectTimeoutMs, exit }) {
    this.address = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
    this.workerId = workerId;
    this.maxMessageLength = maxMessageLength || DEFAULT_MAX_MESSAGE_LENGTH;
    this.connectTimeoutMs = connectTimeoutMs || 10000;
    this.exit = exit || ((code) => process.exit(code));
    this.functions = new Map();   // function_id -> loaded function (see loader.js)
    this.loading = new Map();     // function_id -> load in progress (ES modules load async)
    this.loadErrors = new Map();  // function_id -> why it failed to load
    this.inFlight = 0;
    this.onIdle = null;
    this.call = null;
    this.open = false;
    this.terminating = false;
    this.exiting = false;
    this.shm = null;              // SharedMemory once negotiated (lib/shm.js)
    this.loadTimer = null;        // reports WorkerLoad once the host asked for it
    this.loadIntervalMs = 0;
    this.lastLoadReport = 0;
    // The Node v4 model: the @azure/functions-core module the app's @azure/functions requires.
    this.v4 = new V4State(this);
    this.v4.install();
  }

  start() {
    const proto = loadProto();
    const options = {
      'grpc.max_send_message_length': this.maxMessageLength,
      'grpc.max_receive_message_length': this.maxMessageLength,
      // One long-lived stream: a retry can't resume it, so skip retry buffering; and
      // channelz bookkeeping is per-message overhead nobody reads here.
      'grpc.enable_retries': 0,
      'grpc.enable_channelz': 0,
      // A large receive window: with HTTP/2's default 64 KiB, a 1 MB blob needs a dozen
      // window-update round trips through the event loop.
      'grpc-node.flow_control_window': 16 * 1024 * 1024,
    };
    this.client = new proto.WorkerChannel(this.address, grpc.credentials.createInsecure(), options);
    // The host starts listening before it launches us, but allow for a slow start.
    this.client.waitForReady(Date.now() + this.connectTimeoutMs, (err) => {
      if (err) return this.fatal(`cannot connect to host at ${this.address}: ${err.message}`);
      this.openStream();
    });
  }

  openStream() {
    const call = this.client.EventStream();
    this.call = call;
    this.open = true;
    call.on('data', (msg) => this.dispatch(msg));
    call.on('error', (err) => this.streamClosed(`stream error: ${err.message}`));
    call.on('end', () => this.streamClosed('host ended the stream'));
    call.on('status', (s) => this.streamClosed(`stream closed (${s.code} ${s.details})`));
    this.send({ start_stream: { worker_id: this.workerId } });
  }

  // Without a host there is nothing to do: exit (0 only if we were told to terminate).
  streamClosed(why) {
    this.open = false;
    if (this.exiting) return;
    if (this.terminating) return this.shutdown(0);
    this.fatal(`lost the host: ${why}`);
  }

  fatal(message) {
    if (this.exiting) return;
    process.stderr.write(`[faast node worker ${this.workerId}] ${message}; exiting\n`);
    this.shutdown(1);
  }

  shutdown(code) {
    if (this.exiting) return;
    this.exiting = true;
    this.open = false;
    if (this.loadTimer !== null) clearInterval(this.loadTimer);
    try { if (this.call) this.call.cancel(); } catch { /* already closed */ }
    try { if (this.client) this.client.close(); } catch { /* already closed */ }
    this.exit(code);
  }

  send(msg) {
    if (this.open) this.call.write(msg);
  }

  // RpcLog; invocationId '' for worker-level messages.
  log(invocationId, category, level, message, exception) {
    if (!this.open) {
      process.stderr.write(`[${level}] ${category}: ${message}\n`);
      return;
    }
    const rpcLog = { invocation_id: invocationId, category, level, message };
    if (exception) rpcLog.exception = exception;
    this.call.write({ rpc_log: rpcLog });
  }

  userLog(invocationId, category, level, args) {
    this.log(invocationId, category, level, util.format(...args));
  }

  workerLog(level, message, exception) {
    this.log('', WORKER_CATEGORY, level, message, exception);
  }

  dispatch(msg) {
    try {
      switch (msg.content) {
        case 'invocation_request': return this.onInvocation(msg.invocation_request);
        case 'worker_init_request': return this.onInit(msg);
        case 'function_environment_reload_request': return this.onEnvironmentReload(msg);
        case 'function_load_request': return this.onLoad(msg);
        case 'functions_metadata_request': return this.onMetadata(msg);
        case 'invocation_cancel': return undefined; // best effort: nothing to cancel in v3's model
        case 'worker_terminate': return this.onTerminate(msg.worker_terminate);
        default:
          return this.workerLog('WARNING', `ignoring unexpected message '${msg.content}'`);
      }
    } catch (err) {
      // A bug handling one message must not take down the other in-flight invocations.
      this.workerLog('ERROR', `failed to handle '${msg.content}': ${err && err.stack}`);
      return undefined;
    }
  }

  onInit(msg) {
    const offered = (msg.worker_init_request && msg.worker_init_request.capabilities) || {};
    const capabilities = this.negotiate(offered);
    if (this.startLoadReports(offered[EVENT_LOOP_CAPABILITY])) capabilities[EVENT_LOOP_CAPABILITY] = '1';
    this.send({
      request_id: msg.request_id,
      worker_init_response: {
        worker_version: WORKER_VERSION,
        capabilities,
        result: SUCCESS,
      },
    });
  }

  // Every interval the host asked for: how long our one event loop was busy and idle since we
  // started (totals, which the host differences over its own interval for the compute vote). All
  // functions share this loop, so its busy share, not the invocations in flight, says how full we
  // are. The timer is unref'd: it never keeps a worker alive. Returns whether reports were started.
  startLoadReports(offered) {
    if (offered === undefined || offered === '') return false;
    const intervalMs = Number(offered);
    if (!Number.isInteger(intervalMs) || intervalMs < 1) {
      this.workerLog('WARNING', `capability ${EVENT_LOOP_CAPABILITY}: '${offered}' is no interval in whole milliseconds (1 or more); not reporting the event loop`);
      return false;
    }
    if (this.loadTimer !== null) clearInterval(this.loadTimer);
    this.loadIntervalMs = intervalMs;
    this.lastLoadReport = performance.now();
    this.loadTimer = setInterval(() => this.reportLoad(), intervalMs);
    this.loadTimer.unref();
    return true;
  }

  reportLoad() {
    this.lastLoadReport = performance.now();
    const { active, idle } = performance.eventLoopUtilization();
    this.send({ worker_load: { event_loop_active_ms: active, event_loop_idle_ms: idle } });
  }

  // Specialise to an app (a standby worker, or one started for it, alike): its environment
  // replaces ours, its directory becomes the working directory, and its capabilities are
  // negotiated as at init. Comes before any function load.
  onEnvironmentReload(msg) {
    const request = msg.function_environment_reload_request || {};
    const dir = request.function_app_directory || '';
    let reply;
    try {
      const env = request.environment_variables || {};
      for (const name of Object.keys(process.env)) {
        if (!Object.prototype.hasOwnProperty.call(env, name)) delete process.env[name];
      }
      Object.assign(process.env, env);
      if (dir) process.chdir(dir);
      reply = { capabilities: this.negotiate(request.capabilities || {}), result: SUCCESS };
    } catch (err) {
      const message = `environment reload to '${dir}' failed: ${err && err.message}`;
      this.workerLog('ERROR', message);
      reply = { result: { status: 'FAILURE', result: message, exception: { source: WORKER_CATEGORY, message, stack_trace: (err && err.stack) || '' } } };
    }
    this.send({ request_id: msg.request_id, function_environment_reload_response: reply });
  }

  // The capabilities we accept of what the host offered (shared memory, if its directory is usable).
  negotiate(offered) {
    const capabilities = { concurrent: '1' };
    const { shm, message } = shmModule.negotiate(offered);
    if (this.shm !== null) this.shm.close();
    this.shm = shm;
    if (shm !== null) {
      capabilities[shmModule.CAPABILITY] = '1';
      this.workerLog('INFORMATION', message);
    } else if (message) {
      this.workerLog('WARNING', message);
    }
    return capabilities;
  }

  // FunctionsMetadataRequest: index the app's package.json "main" files (Node v4), or tell the host
  // to read function.json folders (v3).
  onMetadata(msg) {
    const request = msg.functions_metadata_request || {};
    this.v4.index(request.function_app_directory || process.cwd()).then((reply) => {
      if (reply.result.status !== 'SUCCESS') this.workerLog('ERROR', reply.result.result, reply.result.exception);
      this.send({ request_id: msg.request_id, function_metadata_response: reply });
    }, (err) => {
      const message = `indexing the app failed: ${err && err.message}`;
      this.workerLog('ERROR', message);
      this.send({ request_id: msg.request_id, function_metadata_response: { result: { status: 'FAILURE', result: message, exception: { source: WORKER_CATEGORY, message, stack_trace: (err && err.stack) || '' } } } });
    });
  }

  // A function the app registered through @azure/functions (v4), or a v3 script. A load that comes
  // without a metadata request first (a second worker of an app the host already indexed) indexes
  // the app here, unless the function has a function.json (v3 never needs the index).
  async loadAny(functionId, md) {
    let reg = this.v4.find(functionId, md.name);
    if (reg === undefined && !(md.directory && fs.existsSync(path.join(md.directory, 'function.json')))) {
      // Also waits for an indexing in progress (loads arrive concurrently; files load one by one).
      const reply = await this.v4.index(process.cwd());
      reg = this.v4.find(functionId, md.name);
      if (reg === undefined && reply.result.status !== 'SUCCESS' && !md.script_file) throw new LoadError(`Function '${md.name || functionId}': ${reply.result.result}`);
    }
    if (reg !== undefined) return this.v4.loaded(functionId, reg);
    const registered = this.v4.registrations.map((r) => r.metadata.name);
    if (registered.length > 0 && !(md.directory && fs.existsSync(path.join(md.directory, 'function.json')))) {
      throw new LoadError(`Function '${md.name || functionId}' (id '${functionId}') was not registered by the app (registered: ${registered.join(', ')})`);
    }
    return loadFunction(functionId, md);
  }

  onLoad(msg) {
    const { function_id: functionId, metadata } = msg.function_load_request;
    const md = metadata || {};
    const loading = this.loadAny(functionId, md).then(
      (fn) => {
        this.functions.set(functionId, fn);
        this.loadErrors.delete(functionId);
        this.send({ request_id: msg.request_id, function_load_response: { function_id: functionId, result: SUCCESS } });
      },
      (err) => {
        const message = err instanceof LoadError ? err.message
          : `Function '${md.name || functionId}': failed to load '${md.script_file}': ${err && err.message}`;
        const exception = { source: md.name || functionId, message, stack_trace: (err && err.stack) || '' };
        this.functions.delete(functionId);
        this.loadErrors.set(functionId, message);
        this.workerLog('ERROR', message, exception);
        this.send({
          request_id: msg.request_id,
          function_load_response: { function_id: functionId, result: { status: 'FAILURE', result: message, exception } },
        });
      },
    ).finally(() => {
      if (this.loading.get(functionId) === loading) this.loading.delete(functionId);
    });
    this.loading.set(functionId, loading);
  }

  onInvocation(request) {
    this.inFlight++;
    this.startInvocation(request);
  }

  startInvocation(request) {
    const functionId = request.function_id;
    const fn = this.functions.get(functionId);
    if (fn !== undefined) {
      if (fn.v4 !== true) return runInvocation(this, fn, request);
      return runV4Invocation(this, this.v4, fn, request).then(
        (response) => this.completeInvocation(response),
        (err) => this.completeInvocation(failureResponse(this, fn, request.invocation_id, err)),
      );
    }
    // A host that doesn't wait for FunctionLoadResponse before invoking.
    const loading = this.loading.get(functionId);
    if (loading !== undefined) return loading.then(() => this.startInvocation(request));
    const loadError = this.loadErrors.get(functionId);
    const pseudo = { name: functionId, systemCategory: WORKER_CATEGORY };
    return this.completeInvocation(failureResponse(this, pseudo, request.invocation_id, new Error(loadError
      ? `function '${functionId}' is not loaded in this worker: ${loadError}`
      : `function '${functionId}' is not loaded in this worker`)));
  }

  completeInvocation(response) {
    this.send({ invocation_response: response });
    // With invocations waiting back to back, the loop may go from one to the next without reaching
    // its timers phase, and the report timer would starve exactly when the loop is full.
    if (this.loadTimer !== null && performance.now() - this.lastLoadReport >= this.loadIntervalMs) this.reportLoad();
    this.inFlight--;
    if (this.inFlight === 0 && this.onIdle !== null) this.onIdle();
  }

  // Let in-flight invocations finish (up to the grace period), then close our side and exit 0.
  onTerminate(terminate) {
    if (this.terminating) return;
    this.terminating = true;
    const grace = Math.max(0, terminate.grace_period_ms || 0);
    let finished = false;
    const finish = () => {
      if (finished) return; // the grace timer and the appTerminate hooks may both get here
      finished = true;
      this.onIdle = null;
      clearTimeout(graceTimer);
      if (this.open) {
        this.open = false;
        this.call.end();
      }
      // The host normally closes the stream in reply (-> streamClosed -> exit 0); don't wait forever.
      setTimeout(() => this.shutdown(0), 1000).unref();
    };
    const graceTimer = setTimeout(finish, grace);
    // Node v4 appTerminate hooks run once the in-flight invocations are done (or the grace ends).
    const drained = () => { this.v4.runAppTerminate().then(finish, finish); };
    if (this.inFlight === 0) drained();
    else this.onIdle = drained;
  }
}

module.exports = { WorkerChannel, WORKER_VERSION, DEFAULT_MAX_MESSAGE_LENGTH };
