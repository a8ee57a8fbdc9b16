'use strict';
// InvocationRequest -> v3 context + arguments -> user function -> InvocationResponse.
// This is the hot path: everything derivable from the function's metadata was computed
// at load time (see loader.planBindings).
const crypto = require('crypto');
const { HttpResponse } = require('./http');
const { toTimerObject, fromTypedData, toTypedData, toBlobTypedData, toHttpTypedData, fromTriggerMetadata, asBuffer } = require('./converters');

const SUCCESS = Object.freeze({ status: 'SUCCESS' });

function makeLog(channel, invocationId, category) {
  const log = (...args) => channel.userLog(invocationId, category, 'INFORMATION', args);
  log.error = (...args) => channel.userLog(invocationId, category, 'ERROR', args);
  log.warn = (...args) => channel.userLog(invocationId, category, 'WARNING', args);
  log.info = (...args) => channel.userLog(invocationId, category, 'INFORMATION', args);
  log.verbose = (...args) => channel.userLog(invocationId, category, 'TRACE', args);
  return log;
}

function errorParts(err) {
  if (err instanceof Error) {
    return { message: err.message || String(err), stack: typeof err.stack === 'string' ? err.stack : '' };
  }
  if (err && typeof err === 'object' && typeof err.message === 'string') {
    return { message: err.message, stack: typeof err.stack === 'string' ? err.stack : '' };
  }
  let message;
  try { message = typeof err === 'string' ? err : JSON.stringify(err); } catch { message = String(err); }
  return { message: message === undefined ? String(err) : message, stack: '' };
}

function failureResponse(channel, fn, invocationId, err) {
  const { message, stack } = errorParts(err);
  const exception = { source: fn.name, message, stack_trace: stack };
  channel.log(invocationId, fn.systemCategory, 'ERROR', `Function '${fn.name}' failed: ${message}`, exception);
  return { invocation_id: invocationId, result: { status: 'FAILURE', exception } };
}

// `shm`: the negotiated SharedMemory or null; `warn(message)` logs a warning for this invocation.
function buildResponse(fn, context, invocationId, result, shm, warn) {
  const bindings = context.bindings;
  const outputData = [];
  const written = []; // shared-memory output files, handed to the host with the response
  // Without a $return binding, v3 treats a returned object as a bag of named outputs.
  const bag = fn.returnBinding === null && result !== null && typeof result === 'object' &&
    asBuffer(result) === undefined ? result : undefined;
  const outputs = fn.outputs;
  const encode = (binding, value) => {
    if (binding.isHttp) return toHttpTypedData(value);
    if (binding.isBlob && shm) return toBlobTypedData(value, shm, written, warn);
    return toTypedData(value);
  };
  try {
    for (let i = 0; i < outputs.length; i++) {
      const out = outputs[i];
      let value = bag !== undefined ? bag[out.name] : undefined;
      if (value === undefined) value = bindings[out.name];
      if (value === undefined && out.name === fn.httpOutputName) value = context.res;
      if (value === undefined) continue;
      outputData.push({ name: out.name, data: encode(out, value) });
    }
    const response = { invocation_id: invocationId, output_data: outputData, result: SUCCESS };
    if (fn.returnBinding !== null) {
      let value = result;
      if (value === undefined && fn.httpOutputName === '$return') value = context.res;
      if (value !== undefined) response.return_value = encode(fn.returnBinding, value);
    }
    return response;
  } catch (err) {
    if (written.length > 0) shm.discard(written); // the invocation fails: nobody takes them over
    throw err;
  }
}

function buildBindingData(fn, request, invocationId, req, startedAt) {
  const bindingData = fromTriggerMetadata(request.trigger_metadata);
  bindingData.invocationId = invocationId;
  if (req !== undefined) {
    // As v3: HTTP binding data carries query, headers and route params even if the host
    // did not send them as trigger metadata.
    if (bindingData.query === undefined) bindingData.query = Object.assign({}, req.query);
    if (bindingData.headers === undefined) bindingData.headers = Object.assign({}, req.headers);
    const params = req.params;
    for (const key in params) {
      if (bindingData[key] === undefined) bindingData[key] = params[key];
    }
  }
  if (bindingData.sys === undefined) {
    bindingData.sys = { methodName: fn.name, utcNow: new Date(startedAt).toISOString(), randGuid: crypto.randomUUID() };
  }
  return bindingData;
}

// Runs one invocation; calls channel.completeInvocation(response) exactly once.
function runInvocation(channel, fn, request) {
  const invocationId = request.invocation_id;
  let settled = false;
  let returnedPromise = false;
  let userCalledDone = false;
  let context;

  const finish = (err, result) => {
    if (settled) return false;
    settled = true;
    let response;
    if (err) {
      response = failureResponse(channel, fn, invocationId, err);
    } else {
      try {
        response = buildResponse(fn, context, invocationId, result, channel.shm,
          (message) => channel.log(invocationId, fn.systemCategory, 'WARNING', message));
      } catch (convertErr) {
        response = failureResponse(channel, fn, invocationId, convertErr);
      }
    }
    channel.completeInvocation(response);
    return true;
  };

  try {
    const bindings = {};
    const argNames = fn.argNames;
    const args = new Array(argNames.length + 1);
    const inputs = fn.inputs;
    const inputData = request.input_data;
    const shm = channel.shm;
    for (let i = 0; i < inputData.length; i++) {
      const pb = inputData[i];
      const info = inputs.get(pb.name);
      let value;
      try {
        value = fromTypedData(pb.data, info !== undefined ? info.dataType : 'UNDEFINED', shm);
        if (info !== undefined && info.isTimer && value !== undefined && value !== null) value = toTimerObject(value);
      } catch (err) {
        throw new Error(`input binding '${pb.name}': ${err.message}`);
      }
      bindings[pb.name] = value;
      if (info !== undefined && info.position >= 0) args[info.position + 1] = value;
    }

    const req = fn.triggerIsHttp ? bindings[fn.triggerName] : undefined;
    const startedAt = Date.now();
    let bindingData;
    context = {
      invocationId,
      executionContext: {
        invocationId,
        functionName: fn.name,
        functionDirectory: fn.directory,
        retryContext: null,
      },
      bindings,
      // Built on first use: converting trigger metadata (JSON-parsing query and headers) is
      // a large share of a small invocation's cost and most functions never read it.
      get bindingData() {
        if (bindingData === undefined) bindingData = buildBindingData(fn, request, invocationId, req, startedAt);
        return bindingData;
      },
      set bindingData(value) { bindingData = value; },
      traceContext: { traceparent: undefined, tracestate: undefined, attributes: {} },
      log: makeLog(channel, invocationId, fn.userCategory),
      done(err, result) {
        if (settled) {
          channel.log(invocationId, fn.systemCategory, 'WARNING',
            `Function '${fn.name}': 'done' was called after the invocation completed; check for extraneous calls to 'done'`);
          return;
        }
        userCalledDone = true;
        if (returnedPromise) warnPromiseAndDone(channel, fn, invocationId);
        finish(err, result);
      },
    };
    if (req !== undefined) {
      context.req = req;
      // res.send()/end()/json() complete the invocation, like context.done().
      context.res = new HttpResponse(() => { finish(null, undefined); });
    }
    args[0] = context;

    const ret = fn.fn.apply(fn.thisArg, args);
    if (ret !== null && ret !== undefined && typeof ret.then === 'function') {
      returnedPromise = true;
      if (userCalledDone) warnPromiseAndDone(channel, fn, invocationId);
      ret.then(
        (result) => { finish(null, result); },
        (err) => { finish(err || new Error(`Function '${fn.name}' rejected with ${String(err)}`)); },
      );
    }
    // Otherwise (callback style) the invocation completes when context.done() is called.
  } catch (err) {
    finish(err || new Error(`Function '${fn.name}' threw ${String(err)}`));
  }
}

function warnPromiseAndDone(channel, fn, invocationId) {
  channel.log(invocationId, fn.systemCategory, 'WARNING',
    `Function '${fn.name}': choose either to return a promise or call 'done', not both`);
}

module.exports = { runInvocation, buildResponse, failureResponse };
