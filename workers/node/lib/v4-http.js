'use strict';
// What the worker hands @azure/functions 4.x for an HTTP invocation, so the library does not pay for
// undici objects nobody uses. The library wraps a WHATWG Request/Response: its HttpRequest and
// HttpResponse take an already-built one as `nativeRequest`/`nativeResponse` (how its own HTTP-stream
// path builds them). Without that, every invocation builds an undici Request (URL parse, Headers,
// an AbortController) before the handler runs, and reads the handler's { body } back through a
// Response's web stream. Measured with the library's own calls on the worker's inputs
// (bench/v4-library.js, 2026-11-29, 2 shared vCPUs, mean of 20,000 calls, GC included):
// getArguments 13.4 -> 7.0 µs, getResponse of { body: 'ok' } 17.8 -> 9.1 µs, a whole no-op
// invocation 36.5 -> 21.7 µs (v3's conversions of the same: 0.4 µs).
//
// LazyRequest builds the real Request only when something reads it (headers, url, body, ...), with
// exactly the library's arguments, so a handler that reads the request sees what it saw before.
// PlainResponse answers what the library's toRpcHttp reads (status, headers, arrayBuffer) from a
// plain { status, headers, body | jsonBody } with a real Headers and the Response constructor's
// rules; anything else (an HttpResponse, a stream body, an odd status) goes to the library as before.
// Both are used only if the app's library honours the init field (probed once: probe()).

const NULL_BODY_STATUSES = new Set([204, 205, 304]); // fetch's "null body status": the library drops the body
const RESULT_KEYS = new Set(['status', 'headers', 'body', 'jsonBody', 'cookies', 'enableContentNegotiation']);
const TEXT_PLAIN = 'text/plain;charset=UTF-8'; // what a Response sets for a string body
const encoder = new TextEncoder();

// Every property and method of a WHATWG class that LazyRequest/PlainResponse do not answer themselves
// goes to the real object, built on first use: a library version that reads more of it still works.
function forwardRest(Lazy, Real, own) {
  for (const name of Object.getOwnPropertyNames(Real.prototype)) {
    if (name === 'constructor' || own.has(name)) continue;
    const desc = Object.getOwnPropertyDescriptor(Real.prototype, name);
    if (typeof desc.value === 'function') {
      Object.defineProperty(Lazy.prototype, name, {
        value: function forwarded(...args) { const real = this.real(); return real[name](...args); },
        configurable: true,
        writable: true,
      });
    } else if (desc.get) {
      Object.defineProperty(Lazy.prototype, name, { get() { return this.real()[name]; }, configurable: true });
    }
  }
}

// The Request the library would build from the RPC request (HttpRequest's constructor, 4.16.x):
// no body for GET/HEAD, bytes before string, headers as sent.
function buildRequest(rpc) {
  const lower = rpc.method.toLowerCase();
  let body;
  if (lower !== 'get' && lower !== 'head') {
    if (rpc.body && rpc.body.bytes) body = Buffer.from(rpc.body.bytes);
    else if (rpc.body && rpc.body.string) body = rpc.body.string;
  }
  return new Request(rpc.url, { body, method: rpc.method, headers: rpc.headers });
}

class LazyRequest {
  constructor(rpc) {
    this.rpc = rpc;
    this.built = null;
  }

  real() {
    if (this.built === null) this.built = buildRequest(this.rpc);
    return this.built;
  }
}
forwardRest(LazyRequest, Request, new Set());

// A body the library would have dropped (GET/HEAD with a body) is reported as the library does.
function discardedBodyWarning(rpc) {
  const lower = rpc.method.toLowerCase();
  if (lower !== 'get' && lower !== 'head') return undefined;
  const b = rpc.body;
  if (!b || !((b.bytes && b.bytes.length) || b.string)) return undefined;
  return `Discarding the body of the incoming ${rpc.method} request because GET and HEAD requests cannot have a body.`;
}

class PlainResponse {
  constructor(status, headers, bytes) {
    this.status = status;
    this.headers = headers;
    this.bytes = bytes; // Uint8Array, or null for no body
    this.built = null;
  }

  // As Response.arrayBuffer(): a fresh ArrayBuffer with the body's bytes (empty for no body).
  async arrayBuffer() {
    const b = this.bytes;
    if (b === null) return new ArrayBuffer(0);
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
  }

  get body() { return this.real().body; }

  real() {
    if (this.built === null) this.built = new Response(this.bytes, { status: this.status, headers: this.headers });
    return this.built;
  }
}
forwardRest(PlainResponse, Response, new Set(['status', 'headers', 'arrayBuffer', 'body']));

function isPlainObject(v) {
  if (v === null || typeof v !== 'object') return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

// The handler's result -> what the library's HttpResponse would hold, or undefined when the result is
// not a plain { status?, headers?, body?: string | Uint8Array, jsonBody?, cookies?, enableContentNegotiation? }
// (then the library converts it itself, and reports its own errors).
function plainResponse(result) {
  if (!isPlainObject(result)) return undefined;
  for (const key in result) if (!RESULT_KEYS.has(key)) return undefined;
  const status = result.status;
  // Response's own range; a null status is 0 to it (a RangeError the library reports).
  if (status !== undefined && !(Number.isInteger(status) && status >= 200 && status <= 599)) return undefined;
  const body = result.body;
  const jsonBody = result.jsonBody;
  const nullBody = status !== undefined && NULL_BODY_STATUSES.has(status);
  let headers;
  let bytes = null;
  try {
    headers = new Headers(result.headers);
    if (jsonBody !== undefined && jsonBody !== null && !nullBody) {
      const text = JSON.stringify(jsonBody);
      if (typeof text !== 'string') return undefined;
      if (!headers.has('content-type')) headers.set('content-type', 'application/json');
      bytes = encoder.encode(text);
    } else if (body === undefined || body === null || nullBody) {
      bytes = null;
    } else if (typeof body === 'string') {
      if (!headers.has('content-type')) headers.append('content-type', TEXT_PLAIN);
      bytes = encoder.encode(body);
    } else if (body instanceof Uint8Array) {
      bytes = body;
    } else {
      return undefined;
    }
  } catch {
    return undefined; // e.g. an invalid header: the library's own conversion throws its own error
  }
  return {
    nativeResponse: new PlainResponse(status === undefined ? 200 : status, headers, bytes),
    cookies: result.cookies,
    enableContentNegotiation: result.enableContentNegotiation,
  };
}

// Does the app's library take `nativeRequest` / `nativeResponse` as 4.16.x does? `lib` is its exports.
function probe(lib) {
  const out = { request: false, response: false };
  if (!lib || typeof lib.HttpRequest !== 'function' || typeof lib.HttpResponse !== 'function') return out;
  try {
    const marker = { url: 'http://faast.probe/request', method: 'PROBE' };
    const req = new lib.HttpRequest({ nativeRequest: marker, url: 'http://faast.probe/', method: 'GET', query: {}, params: {} });
    out.request = req.url === marker.url && req.method === marker.method;
  } catch {
    out.request = false;
  }
  try {
    const marker = { status: 299 };
    out.response = new lib.HttpResponse({ nativeResponse: marker }).status === 299;
  } catch {
    out.response = false;
  }
  return out;
}

module.exports = { LazyRequest, PlainResponse, plainResponse, discardedBodyWarning, probe, buildRequest };
