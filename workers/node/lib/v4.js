'use strict';
// The Node v4 programming model (@azure/functions 4.x) on this worker. The library does not talk
// to the host itself: it requires `@azure/functions-core`, a module the worker provides, registers
// each function with registerFunction(metadata, callback) and hands the worker a ProgrammingModel
// whose InvocationModel converts an invocation (in Azure's camelCase RpcInvocationRequest shape) to
// its arguments and the result back. This file is that module, the indexing of package.json's
// `main` (FunctionsMetadataRequest), and the conversion between our proto and Azure's shapes.
const fs = require('fs');
const path = require('path');
const Module = require('module');
const { matchFiles } = require('./glob');
const { fromTypedData, toBlobTypedData, asBuffer, serializeCookie } = require('./converters');
const v4http = require('./v4-http');

const CORE_MODULE = '@azure/functions-core';
const HOOK_NAMES = ['appStart', 'appTerminate', 'preInvocation', 'postInvocation', 'log'];
// Azure's RpcLog levels as the library names them -> our RpcLog.Level.
const LEVELS = { trace: 'TRACE', debug: 'DEBUG', information: 'INFORMATION', warning: 'WARNING', error: 'ERROR', critical: 'CRITICAL', none: 'TRACE' };

class Disposable {
  constructor(callOnDispose) { this._callOnDispose = callOnDispose; }
  static from(...items) {
    return new Disposable(() => { for (const d of items) if (d && typeof d.dispose === 'function') d.dispose(); });
  }
  dispose() {
    const f = this._callOnDispose;
    this._callOnDispose = null;
    if (f) f();
  }
}

// One per worker process: the app's registrations and hooks.
class V4State {
  constructor(channel) {
    this.channel = channel;
    this.model = null;
    this.registrations = [];     // { metadata, callback, scriptFile, functionId }
    this.byId = new Map();
    this.hooks = new Map(HOOK_NAMES.map((n) => [n, []]));
    this.currentFile = null;     // the file being required: who registered a function
    this.indexed = null;         // the last index result (see index())
    this.appHookData = {};
    // Whether the app's library takes a built request/response (lib/v4-http.js); probed at indexing.
    this.native = { request: false, response: false };
    this.core = this.makeCore();
  }

  makeCore() {
    const state = this;
    return Object.freeze({
      version: '4.0.0-faast',
      hostVersion: 'faast',
      Disposable,
      registerFunction(metadata, callback) {
        if (!metadata || typeof metadata.name !== 'string' || metadata.name === '') {
          throw new Error(`${CORE_MODULE}.registerFunction: metadata.name must be a non-empty string`);
        }
        if (typeof callback !== 'function') {
          throw new Error(`${CORE_MODULE}.registerFunction: function '${metadata.name}' has no callback function`);
        }
        const reg = { metadata, callback, scriptFile: state.currentFile, functionId: '' };
        state.registrations.push(reg);
        return new Disposable(() => {
          const i = state.registrations.indexOf(reg);
          if (i >= 0) state.registrations.splice(i, 1);
        });
      },
      registerHook(hookName, callback) {
        const list = state.hooks.get(hookName);
        if (list === undefined) {
          // The library maps a RangeError to "this host is too old" for hooks it may not have.
          throw new RangeError(`${CORE_MODULE}.registerHook: unknown hook '${hookName}' (known: ${HOOK_NAMES.join(', ')})`);
        }
        if (typeof callback !== 'function') throw new TypeError(`${CORE_MODULE}.registerHook('${hookName}'): callback is not a function`);
        list.push(callback);
        return new Disposable(() => {
          const i = list.indexOf(callback);
          if (i >= 0) list.splice(i, 1);
        });
      },
      setProgrammingModel(model) {
        if (!model || typeof model.getInvocationModel !== 'function') {
          throw new Error(`${CORE_MODULE}.setProgrammingModel: the model has no getInvocationModel()`);
        }
        state.model = model;
      },
      getProgrammingModel() { return state.model; },
      log(level, category, message) {
        const hooked = state.runLogHooks(level, category || 'system', String(message), undefined);
        state.channel.workerLog(LEVELS[hooked.level] || 'INFORMATION', hooked.message);
      },
    });
  }

  // Log hooks see every log and may change a user log's level and message (as the public
  // LogHookContext documents); they are synchronous. A throwing hook must not lose the log.
  runLogHooks(level, category, message, invocationContext) {
    const hooks = this.hooks.get('log');
    if (hooks.length === 0) return { level, message };
    const ctx = { hookData: this.appHookData, level, category, message, invocationContext };
    for (const hook of hooks.slice()) {
      try {
        hook(ctx);
      } catch (err) {
        this.channel.workerLog('ERROR', `log hook failed: ${describe(err)}`);
      }
    }
    return category === 'user' ? { level: ctx.level, message: String(ctx.message) } : { level, message };
  }

  // Makes require('@azure/functions-core') return our module, from any file of the app.
  install() {
    const core = this.core;
    const originalLoad = Module._load;
    Module._load = function load(request, parent, isMain) {
      if (request === CORE_MODULE) return core;
      return originalLoad.call(this, request, parent, isMain);
    };
  }

  // FunctionsMetadataRequest: require the files package.json's `main` names and report what they
  // registered. Returns the FunctionMetadataResponse. Indexing happens once per worker: files are
  // required once, and a second request answers from the first result.
  async index(appDir) {
    if (this.indexed === null) this.indexed = this.indexOnce(appDir);
    return this.indexed;
  }

  async indexOnce(appDir) {
    const dir = path.resolve(appDir || process.cwd());
    const useDefault = { function_metadata_results: [], result: { status: 'SUCCESS' }, use_default_metadata_indexing: true };
    const v3 = hasFunctionJson(dir);
    const pkgFile = path.join(dir, 'package.json');
    let main;
    if (fs.existsSync(pkgFile)) {
      try {
        main = JSON.parse(fs.readFileSync(pkgFile, 'utf8')).main;
      } catch (err) {
        if (v3) return useDefault;
        return failure(`'${pkgFile}' is not valid JSON: ${err.message}`);
      }
    }
    if (typeof main !== 'string' || main === '') {
      if (v3) return useDefault;
      return failure(`no functions to index in '${dir}': package.json has no "main" naming the files that register functions (e.g. "main": "src/functions/*.js") and there is no function.json`);
    }
    let files;
    try {
      files = matchFiles(dir, main);
    } catch (err) {
      return failure(`package.json "main" '${main}': ${err.message}`);
    }
    if (files.length === 0) {
      // A v3 app with npm init's default "main": "index.js" and no such file keeps working.
      if (v3) return useDefault;
      return failure(`package.json "main" '${main}' matches no file in '${dir}'`);
    }
    for (const file of files) {
      this.currentFile = file;
      try {
        await requireFile(file);
      } catch (err) {
        return failure(`failed to load '${file}' (package.json "main" '${main}'): ${describe(err)}`, err);
      } finally {
        this.currentFile = null;
      }
    }
    if (this.registrations.length === 0) {
      if (v3) return useDefault;
      return failure(`no function was registered by the files package.json "main" '${main}' matches (${files.map((f) => path.relative(dir, f)).join(', ')})`);
    }
    if (this.model === null) {
      return failure(`functions were registered but no programming model was set (${CORE_MODULE}.setProgrammingModel was never called)`);
    }
    const seen = new Map();
    const results = [];
    for (const reg of this.registrations) {
      const name = reg.metadata.name;
      const where = reg.scriptFile ? path.relative(dir, reg.scriptFile) : 'outside package.json "main"';
      const key = name.toLowerCase(); // function names are case-insensitive to the host
      if (seen.has(key)) {
        return failure(`two functions are named '${name}': registered in '${seen.get(key)}' and in '${where}'; function names must be unique`);
      }
      seen.set(key, where);
      let md;
      try {
        md = this.toRpcMetadata(reg, dir);
      } catch (err) {
        return failure(`function '${name}' (${where}): ${err.message}`);
      }
      results.push(md);
    }
    // As at Azure's worker init: the library locks app.setup() here and says what it needs.
    if (typeof this.model.getCapabilities === 'function') {
      let caps;
      try {
        caps = await this.model.getCapabilities({});
      } catch (err) {
        return failure(`the programming model ${this.model.name || ''} failed to start: ${describe(err)}`, err);
      }
      if (caps && caps.HttpUri) {
        return failure('HTTP streaming (app.setup({ enableHttpStream: true })) is not supported by this runtime: HTTP requests and responses travel in the invocation messages; remove the setting');
      }
    }
    this.native = probeLibrary(dir, this.registrations);
    await this.runAppStart(dir);
    return { function_metadata_results: results, result: { status: 'SUCCESS' }, use_default_metadata_indexing: false };
  }

  toRpcMetadata(reg, dir) {
    const { metadata } = reg;
    const bindings = metadata.bindings || {};
    const raw = [];
    for (const name of Object.keys(bindings)) {
      const b = bindings[name] || {};
      if (typeof b.type !== 'string' || b.type === '') throw new Error(`binding '${name}' has no type`);
      // function.json's shape: name, type, direction and the binding's own keys. `properties` is
      // the library's deferred-binding flag for Azure's SDK-type bindings, not a binding setting.
      const entry = { name, type: b.type, direction: b.direction };
      for (const key of Object.keys(b)) {
        if (key === 'properties' || key === 'name' || key === 'type' || key === 'direction' || b[key] === undefined) continue;
        entry[key] = b[key];
      }
      raw.push(JSON.stringify(entry));
    }
    const functionId = `${metadata.name}`;
    reg.functionId = functionId;
    this.byId.set(functionId, reg);
    const md = {
      name: metadata.name,
      directory: dir,
      script_file: reg.scriptFile || '',
      entry_point: metadata.name,
      raw_bindings: raw,
      language: 'node',
      function_id: functionId,
      properties: {},
    };
    const retry = toRetryOptions(metadata.retryOptions);
    if (retry) md.retry_options = retry;
    return md;
  }

  // WorkerTerminate: appTerminate hooks, before the worker exits (bounded by the grace period there).
  async runAppTerminate() {
    for (const hook of this.hooks.get('appTerminate').slice()) {
      try {
        await hook({ hookData: this.appHookData });
      } catch (err) {
        this.channel.workerLog('ERROR', `appTerminate hook failed: ${describe(err)}`);
      }
    }
  }

  async runAppStart(dir) {
    for (const hook of this.hooks.get('appStart').slice()) {
      try {
        await hook({ hookData: this.appHookData, functionAppDirectory: dir });
      } catch (err) {
        this.channel.workerLog('ERROR', `appStart hook failed: ${describe(err)}`);
      }
    }
  }

  // FunctionLoadRequest for a function the app registered: by the function_id we reported, else
  // by name (a host that assigns its own ids). undefined if it is not a v4 function.
  find(functionId, name) {
    const byId = this.byId.get(functionId);
    if (byId !== undefined) return byId;
    const lower = (name || '').toLowerCase();
    return this.registrations.find((r) => r.metadata.name.toLowerCase() === lower);
  }

  loaded(functionId, reg) {
    const name = reg.metadata.name;
    const bindings = reg.metadata.bindings || {};
    const ret = bindings.$return;
    return {
      v4: true,
      // app.http's response is the $return value: a plain { body } one need not become an undici Response.
      httpReturn: ret !== undefined && ret !== null && typeof ret.type === 'string' && ret.type.toLowerCase() === 'http',
      id: functionId,
      name,
      reg,
      bindings,
      userCategory: `Function.${name}.User`,
      systemCategory: `Function.${name}`,
    };
  }
}

// The app's @azure/functions, as its files required it (from the directory of one that registered a
// function; require's cache makes it the same instance), probed for the init fields lib/v4-http.js
// uses. A library that cannot be found this way (bundled into the app, say) is driven as before.
function probeLibrary(dir, registrations) {
  const from = registrations.find((r) => r.scriptFile);
  let lib;
  try {
    const resolved = require.resolve('@azure/functions', { paths: [from ? path.dirname(from.scriptFile) : dir] });
    if (require.cache[resolved] === undefined) return { request: false, response: false }; // not the one the app loaded
    lib = require.cache[resolved].exports;
  } catch {
    return { request: false, response: false };
  }
  return v4http.probe(lib);
}

function hasFunctionJson(dir) {
  let entries;
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return false; }
  return entries.some((e) => e.isDirectory() && fs.existsSync(path.join(dir, e.name, 'function.json')));
}

async function requireFile(file) {
  if (file.endsWith('.mjs')) return import(require('url').pathToFileURL(file).href);
  try {
    return require(file);
  } catch (err) {
    if (err && err.code === 'ERR_REQUIRE_ESM') return import(require('url').pathToFileURL(file).href);
    throw err;
  }
}

function describe(err) {
  return err && err.name && err.message ? `${err.name}: ${err.message}` : String(err);
}

function failure(message, err) {
  return {
    function_metadata_results: [],
    use_default_metadata_indexing: false,
    result: { status: 'FAILURE', result: message, exception: { source: 'Worker.Node', message, stack_trace: (err && err.stack) || '' } },
  };
}

function toDuration(d) {
  if (!d) return undefined;
  const seconds = Number(d.seconds || 0);
  const nanos = Number(d.nanos || 0);
  return { seconds, nanos };
}

// The library's RpcRetryOptions ({ maxRetryCount, retryStrategy: 'fixedDelay' | 'exponentialBackoff',
// delayInterval, minimumInterval, maximumInterval as { seconds } }) -> ours.
function toRetryOptions(r) {
  if (!r) return undefined;
  const strategy = String(r.retryStrategy || r.strategy || '').toLowerCase();
  const out = { max_retry_count: Number(r.maxRetryCount || 0) };
  if (strategy === 'fixeddelay' || strategy === 'fixed_delay') {
    out.retry_strategy = 'fixed_delay';
    out.delay_interval = toDuration(r.delayInterval);
  } else if (strategy === 'exponentialbackoff' || strategy === 'exponential_backoff') {
    out.retry_strategy = 'exponential_backoff';
    out.minimum_interval = toDuration(r.minimumInterval);
    out.maximum_interval = toDuration(r.maximumInterval);
  } else {
    throw new Error(`retry strategy '${r.retryStrategy || r.strategy}' is neither 'fixedDelay' nor 'exponentialBackoff'`);
  }
  return out;
}

// ---- invocation: our proto -> Azure's RpcInvocationRequest shape -> library -> back ----

function bindingDataType(b) {
  const dt = b && typeof b.dataType === 'string' ? b.dataType.toLowerCase() : '';
  return dt === 'string' ? 'STRING' : dt === 'binary' || dt === 'stream' ? 'BINARY' : 'UNDEFINED';
}

// `native`: hand the library a LazyRequest as its nativeRequest (see lib/v4-http.js); the library
// still gets every field it would build one from.
function toRpcHttpRequest(http, native, state) {
  const out = {
    method: http.method,
    url: http.url,
    headers: Object.assign({}, http.headers),
    query: Object.assign({}, http.query),
    params: Object.assign({}, http.params),
  };
  const body = http.body;
  if (body && body.data === 'bytes') out.body = { bytes: body.bytes };
  else if (body && body.data === 'string') out.body = { string: body.string };
  else if (body && body.data === 'json') out.body = { string: body.json };
  if (native) {
    const discarded = v4http.discardedBodyWarning(out);
    if (discarded !== undefined) state.core.log('warning', 'system', discarded);
    out.nativeRequest = new v4http.LazyRequest(out);
  }
  return out;
}

// Our TypedData -> Azure's RpcTypedData (camelCase, as the library reads it). Blobs arrive as
// bytes (read from shared memory when the cachelet sent them there), or as a string for a
// binding with dataType 'string'.
function toRpcTypedData(typed, binding, shm, state) {
  if (!typed || !typed.data) return undefined;
  switch (typed.data) {
    case 'string': return { string: typed.string };
    case 'json': return { json: typed.json };
    case 'bytes': return { bytes: typed.bytes };
    case 'http': return { http: toRpcHttpRequest(typed.http, state !== undefined && state.native.request, state) };
    case 'blob': {
      const dataType = bindingDataType(binding);
      const value = fromTypedData(typed, dataType === 'STRING' ? 'STRING' : 'BINARY', shm);
      return typeof value === 'string' ? { string: value } : { bytes: value };
    }
    default: return undefined;
  }
}

// `state` (optional): the V4State, whose probe says whether HTTP requests go to the library lazily.
function toRpcRequest(request, bindings, shm, state) {
  const inputData = [];
  for (const pb of request.input_data) {
    let data;
    try {
      data = toRpcTypedData(pb.data, bindings[pb.name], shm, state);
    } catch (err) {
      throw new Error(`input binding '${pb.name}': ${err.message}`);
    }
    inputData.push({ name: pb.name, data });
  }
  const triggerMetadata = {};
  const tm = request.trigger_metadata || {};
  for (const key of Object.keys(tm)) {
    const data = toRpcTypedData(tm[key], undefined, null);
    if (data !== undefined) triggerMetadata[key] = data;
  }
  return { invocationId: request.invocation_id, functionId: request.function_id, inputData, triggerMetadata };
}

// Azure's RpcHttpCookie (nullable fields as { value }) -> a Set-Cookie header value.
function cookieHeader(c) {
  const v = (x) => (x && typeof x === 'object' && 'value' in x ? x.value : x);
  const expires = v(c.expires);
  const sameSite = c.sameSite === 'explicitNone' ? 'None' : c.sameSite === 'lax' ? 'Lax' : c.sameSite === 'strict' ? 'Strict' : undefined;
  return serializeCookie({
    name: c.name,
    value: c.value,
    domain: v(c.domain),
    path: v(c.path),
    expires: expires && typeof expires === 'object' ? new Date(Number(expires.seconds) * 1000) : undefined,
    maxAge: v(c.maxAge),
    secure: v(c.secure),
    httpOnly: v(c.httpOnly),
    sameSite,
  });
}

function fromRpcBody(body) {
  if (body === null || body === undefined) return undefined;
  if (body.bytes !== undefined && body.bytes !== null) return { bytes: Buffer.from(body.bytes.buffer, body.bytes.byteOffset, body.bytes.byteLength) };
  if (typeof body.string === 'string') return { string: body.string };
  if (typeof body.json === 'string') return { json: body.json };
  return undefined;
}

function fromRpcHttpResponse(http) {
  const out = { status_code: 0, headers: {} };
  if (http.statusCode !== undefined && http.statusCode !== null && http.statusCode !== '') {
    const code = Number(http.statusCode);
    if (!Number.isInteger(code) || code < 100 || code > 999) throw new Error(`invalid HTTP status code: ${JSON.stringify(http.statusCode)}`);
    out.status_code = code;
  }
  const setCookies = [];
  for (const key of Object.keys(http.headers || {})) {
    const value = http.headers[key];
    if (value === undefined || value === null) continue;
    if (key.toLowerCase() === 'set-cookie') setCookies.push(String(value));
    else out.headers[key] = String(value);
  }
  for (const c of http.cookies || []) setCookies.push(cookieHeader(c));
  if (setCookies.length > 0) out.set_cookies = setCookies;
  const body = fromRpcBody(http.body);
  if (body !== undefined) out.body = body;
  return { http: out };
}

// Azure's RpcTypedData (from the library's getResponse) -> our TypedData. Blob outputs big enough
// go to shared memory as v3's do.
function fromRpcTypedData(data, binding, shm, written, warn) {
  if (data === null || data === undefined) return {};
  if (data.http) return fromRpcHttpResponse(data.http);
  let value;
  if (typeof data.string === 'string') value = data.string;
  else if (data.bytes !== undefined && data.bytes !== null) value = asBuffer(data.bytes);
  else if (typeof data.json === 'string') return { json: data.json };
  else if (typeof data.int === 'number' || typeof data.double === 'number') return { json: JSON.stringify(data.int ?? data.double) };
  else throw new Error(`unsupported output value (${Object.keys(data).join(', ') || 'empty'})`);
  const isBlob = binding && typeof binding.type === 'string' && binding.type.toLowerCase() === 'blob';
  if (isBlob && shm) return toBlobTypedData(value, shm, written, warn);
  return typeof value === 'string' ? { string: value } : { bytes: value };
}

async function runHooks(list, ctx) {
  for (const hook of list.slice()) await hook(ctx);
}

// With no hooks registered (the usual case) the invocation does not wait on an empty async call.
function hooksFor(state, name) {
  const list = state.hooks.get(name);
  return list.length === 0 ? null : list;
}

// Runs one v4 invocation and resolves to our InvocationResponse; rejects with the function's (or a
// hook's, or a conversion's) error, which the channel turns into a failure response as for v3.
async function runV4Invocation(channel, state, fn, request) {
  const shm = channel.shm;
  const invocationId = request.invocation_id;
  const written = [];
  const coreCtx = {
    invocationId,
    request: toRpcRequest(request, fn.bindings, shm, state),
    metadata: { name: fn.name, bindings: fn.bindings, directory: path.dirname(fn.reg.scriptFile || '.'), scriptFile: fn.reg.scriptFile },
    state: undefined,
    log(level, category, message) {
      const hooked = state.runLogHooks(level, category, String(message), invocationContext);
      channel.log(invocationId, category === 'system' ? fn.systemCategory : fn.userCategory, LEVELS[hooked.level] || 'INFORMATION', hooked.message);
    },
  };
  let invocationContext;
  try {
    const model = state.model.getInvocationModel(coreCtx);
    const { context, inputs } = await model.getArguments();
    invocationContext = context;
    const hookData = {};
    const pre = { invocationContext: context, inputs, functionCallback: fn.reg.callback, hookData };
    coreCtx.state = 'preInvocationHooks';
    const preHooks = hooksFor(state, 'preInvocation');
    if (preHooks !== null) await runHooks(preHooks, pre);
    coreCtx.state = 'invocation';
    let result;
    let error;
    try {
      result = await model.invokeFunction(context, pre.inputs, pre.functionCallback);
    } catch (err) {
      error = err === undefined || err === null ? new Error(`Function '${fn.name}' threw ${String(err)}`) : err;
    }
    const post = { invocationContext: context, inputs: pre.inputs, result, error, hookData };
    coreCtx.state = 'postInvocationHooks';
    const postHooks = hooksFor(state, 'postInvocation');
    if (postHooks !== null) await runHooks(postHooks, post);
    if (post.error !== undefined && post.error !== null) throw post.error;
    let returned = post.result;
    if (fn.httpReturn && state.native.response) {
      const plain = v4http.plainResponse(returned);
      if (plain !== undefined) returned = plain;
    }
    const rpc = await model.getResponse(context, returned);
    const warn = (message) => channel.log(invocationId, fn.systemCategory, 'WARNING', message);
    const outputData = [];
    for (const od of rpc.outputData || []) {
      outputData.push({ name: od.name, data: fromRpcTypedData(od.data, fn.bindings[od.name], shm, written, warn) });
    }
    const response = { invocation_id: invocationId, output_data: outputData, result: { status: 'SUCCESS' } };
    // The library also returns a trigger's return value with no $return binding (for Durable);
    // our host has nowhere to send it.
    if (fn.bindings.$return !== undefined && rpc.returnValue !== undefined) {
      response.return_value = fromRpcTypedData(rpc.returnValue, fn.bindings.$return, shm, written, warn);
    }
    return response;
  } catch (err) {
    if (written.length > 0) shm.discard(written); // the invocation fails: nobody takes them over
    throw err;
  }
}

module.exports = { V4State, Disposable, runV4Invocation, toRpcRequest, fromRpcTypedData, toRetryOptions, probeLibrary, CORE_MODULE };
