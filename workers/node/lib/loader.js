'use strict';
// FunctionLoadRequest: load the user's script, resolve its entry point the way Azure
// Functions Node v3 does, and precompute everything an invocation needs (binding plan,
// log categories) so the invocation path does no per-call analysis.
const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');

class LoadError extends Error {}

function describeLoadFailure(err) {
  const what = err && err.name && err.message ? `${err.name}: ${err.message}` : String(err);
  // Node puts "file:line" (plus the offending line) at the top of a SyntaxError's stack.
  if (err instanceof SyntaxError && typeof err.stack === 'string') {
    const first = err.stack.split('\n', 1)[0];
    if (first && !first.startsWith('SyntaxError')) return `${what} (at ${first})`;
  }
  return what;
}

async function requireScript(scriptFile) {
  if (scriptFile.endsWith('.mjs')) return { exports: await import(pathToFileURL(scriptFile).href), esm: true };
  try {
    return { exports: require(scriptFile), esm: false };
  } catch (err) {
    // A .js file in a "type": "module" package.
    if (err && err.code === 'ERR_REQUIRE_ESM') {
      return { exports: await import(pathToFileURL(scriptFile).href), esm: true };
    }
    throw err;
  }
}

// "name" for functions, "name (type)" for anything else: what a load error shows of a module.
function listExports(obj) {
  const keys = obj && (typeof obj === 'object' || typeof obj === 'function') ? Object.keys(obj) : [];
  if (!keys.length) return obj === undefined || obj === null || typeof obj === 'object' ? 'none' : `none; the module is a ${typeof obj}`;
  return keys.map((k) => {
    const v = obj[k];
    if (typeof v === 'function') return k;
    return `${k} (${v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v})`;
  }).join(', ');
}

// Returns { fn, thisArg } or throws LoadError naming the function, the file and the exports.
// The rules of the Azure Functions Node v3 worker:
//   1. entryPoint (function.json) when given: that export, which must be a function;
//   2. module.exports when it is itself a function;
//   3. the only exported function, `default` included: TypeScript's `export default f`
//      compiles to `exports.default = f` (its `__esModule` marker is not enumerable, and
//      not a function if it were);
//   4. among several: one named `run`, else `index`;
//   otherwise a load error.
// An ES module (.mjs, "type": "module") with a function as its default export uses it (as
// before); a default-exported object with no named exports is treated as the exports.
function resolveEntryPoint(mod, esm, entryPoint, name, scriptFile) {
  let exportsObj = mod;
  if (esm) {
    if (!entryPoint && typeof mod.default === 'function') return { fn: mod.default, thisArg: mod };
    const named = Object.keys(mod).filter((k) => k !== 'default');
    if (named.length === 0 && mod.default && typeof mod.default === 'object') exportsObj = mod.default;
  }

  if (entryPoint) {
    const fn = exportsObj != null ? exportsObj[entryPoint] : undefined;
    if (typeof fn !== 'function') {
      throw new LoadError(`Function '${name}': entry point '${entryPoint}' is not a function exported by '${scriptFile}' (exports: ${listExports(exportsObj)})`);
    }
    return { fn, thisArg: exportsObj };
  }

  if (typeof exportsObj === 'function') return { fn: exportsObj, thisArg: undefined };

  if (exportsObj && typeof exportsObj === 'object') {
    const fnKeys = Object.keys(exportsObj).filter((k) => typeof exportsObj[k] === 'function');
    if (fnKeys.length === 1) return { fn: exportsObj[fnKeys[0]], thisArg: exportsObj };
    for (const conventional of ['run', 'index']) {
      if (typeof exportsObj[conventional] === 'function') return { fn: exportsObj[conventional], thisArg: exportsObj };
    }
    if (fnKeys.length > 1) {
      throw new LoadError(`Function '${name}': '${scriptFile}' exports several functions (${fnKeys.join(', ')}) and none is named 'run' or 'index'; set entryPoint in function.json to choose one (exports: ${listExports(exportsObj)})`);
    }
  }
  throw new LoadError(`Function '${name}': '${scriptFile}' does not export a function (exports: ${listExports(exportsObj)}); export one function (module.exports = f, exports.f = f, or export default f), or one named 'run' or 'index', or set entryPoint in function.json`);
}

function isTriggerType(type) {
  return typeof type === 'string' && type.toLowerCase().endsWith('trigger');
}

function isHttpType(type) {
  return typeof type === 'string' && type.toLowerCase().startsWith('http');
}

// The invocation plan: which input goes where, which outputs to read back.
function planBindings(bindings) {
  const inputs = new Map();   // name -> { dataType, position }
  const outputs = [];         // { name, isHttp, isBlob } in metadata order, "$return" excluded
  let triggerName = null;
  let triggerIsHttp = false;
  let returnBinding = null;
  let httpOutputName = null;  // receives context.res when nothing else was set
  const otherInputs = [];

  for (const name of Object.keys(bindings || {})) {
    const b = bindings[name] || {};
    const direction = b.direction || 'IN';
    const isHttp = isHttpType(b.type);
    const isBlob = typeof b.type === 'string' && b.type.toLowerCase() === 'blob';
    if (direction === 'IN' || direction === 'INOUT') {
      if (triggerName === null && isTriggerType(b.type)) {
        triggerName = name;
        triggerIsHttp = isHttp;
      } else {
        otherInputs.push(name);
      }
      const isTimer = typeof b.type === 'string' && b.type.toLowerCase() === 'timertrigger';
      inputs.set(name, { dataType: b.data_type || 'UNDEFINED', position: -1, isTimer });
    }
    if (direction === 'OUT' || direction === 'INOUT') {
      if (isHttp && httpOutputName === null) httpOutputName = name;
      if (name === '$return') returnBinding = { isHttp, isBlob };
      else outputs.push({ name, isHttp, isBlob });
    }
  }
  // Arguments after context: the trigger, then the other inputs in metadata order.
  const argNames = triggerName === null ? otherInputs : [triggerName, ...otherInputs];
  argNames.forEach((name, i) => { inputs.get(name).position = i; });
  return { inputs, argNames, outputs, triggerName, triggerIsHttp, returnBinding, httpOutputName };
}

async function loadFunction(functionId, metadata) {
  const name = metadata.name || functionId;
  if (!metadata.script_file) throw new LoadError(`Function '${name}': no script_file in its metadata`);
  const scriptFile = path.resolve(metadata.directory || process.cwd(), metadata.script_file);
  if (!fs.existsSync(scriptFile)) {
    throw new LoadError(`Function '${name}': script file '${scriptFile}' does not exist`);
  }
  let loaded;
  try {
    loaded = await requireScript(scriptFile);
  } catch (err) {
    throw new LoadError(`Function '${name}': failed to load script file '${scriptFile}': ${describeLoadFailure(err)}`);
  }
  const { fn, thisArg } = resolveEntryPoint(loaded.exports, loaded.esm, metadata.entry_point, name, scriptFile);
  const plan = planBindings(metadata.bindings);
  return {
    id: functionId,
    name,
    directory: metadata.directory || path.dirname(scriptFile),
    scriptFile,
    fn,
    thisArg,
    userCategory: `Function.${name}.User`,
    systemCategory: `Function.${name}`,
    ...plan,
  };
}

module.exports = { loadFunction, LoadError, planBindings, resolveEntryPoint };
