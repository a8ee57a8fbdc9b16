'use strict';
// TypedData (the wire's value type) <-> JavaScript values, with Azure Functions v3 semantics.
const { HttpRequest } = require('./http');
const { NOT_ENABLED } = require('./shm');

// Shared immutable TypedData for null (an unset oneof).
const NULL_TYPED = Object.freeze({});

// `dataType` is the binding's BindingInfo.DataType ('STRING', 'BINARY', 'UNDEFINED', 'STREAM');
// `shm` the negotiated SharedMemory (undefined/null when off).
function fromTypedData(typed, dataType, shm) {
  if (!typed) return null;
  switch (typed.data) {
    case 'string':
      return dataType === 'BINARY' ? Buffer.from(typed.string, 'utf8') : typed.string;
    case 'json':
      try { return JSON.parse(typed.json); } catch { return typed.json; }
    case 'bytes':
      return dataType === 'STRING' ? typed.bytes.toString('utf8') : typed.bytes;
    case 'http':
      return new HttpRequest(typed.http);
    case 'blob':
      return fromBlob(typed.blob, dataType, shm);
    default:
      return null; // unset: null (e.g. a missing input blob)
  }
}

function fromBlob(blob, dataType, shm) {
  let bytes;
  if (blob.content === 'shared_memory') {
    const ref = blob.shared_memory || {};
    try {
      if (!shm) throw new Error(NOT_ENABLED);
      bytes = shm.read(ref);
    } catch (err) {
      const what = blob.name ? `blob '${blob.name}'` : 'blob';
      throw new Error(`${what} in shared memory segment '${ref.segment}': ${err.message}`);
    }
  } else {
    // A BlobData without content is an empty blob (the blob exists: a missing one is an unset TypedData).
    bytes = blob.content === 'bytes' ? blob.bytes : Buffer.alloc(0);
  }
  return dataType === 'STRING' ? bytes.toString('utf8') : bytes;
}

// Wraps binary views as a Buffer over the same memory (no copy).
function asBuffer(value) {
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) return Buffer.from(value);
  if (ArrayBuffer.isView(value)) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  return undefined;
}

// JS -> TypedData for a non-HTTP binding. Callers skip undefined themselves.
function toTypedData(value) {
  if (value === null || value === undefined) return NULL_TYPED;
  if (typeof value === 'string') return { string: value };
  if (typeof value === 'object' || typeof value === 'function') {
    const buffer = asBuffer(value);
    if (buffer !== undefined) return { bytes: buffer };
  }
  const json = JSON.stringify(value);
  return json === undefined ? NULL_TYPED : { json };
}

// JS -> TypedData for a blob output. With shared memory on, a string or binary value of at
// least shm.minBytes is written to a new file there (its name appended to `written`) and the
// TypedData refers to it; if writing fails, warn(message) is called and the value goes inline.
function toBlobTypedData(value, shm, written, warn) {
  if (!shm) return toTypedData(value);
  let buffer;
  if (typeof value === 'string') {
    // UTF-8 needs at most 3 bytes per UTF-16 code unit: skip measuring short strings.
    if (value.length * 3 < shm.minBytes || Buffer.byteLength(value, 'utf8') < shm.minBytes) return { string: value };
    buffer = Buffer.from(value, 'utf8');
  } else if (value !== null && typeof value === 'object') {
    buffer = asBuffer(value);
  }
  if (buffer === undefined || buffer.length < shm.minBytes) return toTypedData(value);
  let name;
  try {
    name = shm.write(buffer);
  } catch (err) {
    warn(`writing a ${buffer.length}-byte output to shared memory failed (${err.message}); sending it inline`);
    return toTypedData(value);
  }
  written.push(name);
  return { blob: { length: buffer.length, shared_memory: { segment: name, offset: 0, length: buffer.length } } };
}

function hasHeader(headers, lowerName) {
  for (const key in headers) {
    if (key.toLowerCase() === lowerName) return true;
  }
  return false;
}

const SAME_SITE = { strict: 'Strict', lax: 'Lax', none: 'None' };

// A v3 response cookie ({ name, value, domain, path, expires, secure, httpOnly, sameSite,
// maxAge }) as a Set-Cookie header value (RFC 6265 §4.1).
function serializeCookie(cookie) {
  if (!cookie || typeof cookie !== 'object' || typeof cookie.name !== 'string' || cookie.name === '') {
    throw new Error(`invalid cookie in the response's cookies: ${JSON.stringify(cookie)} (expected { name, value, ... })`);
  }
  let text = `${cookie.name}=${cookie.value === undefined || cookie.value === null ? '' : String(cookie.value)}`;
  if (cookie.domain) text += `; Domain=${cookie.domain}`;
  if (cookie.path) text += `; Path=${cookie.path}`;
  if (cookie.expires !== undefined && cookie.expires !== null) {
    const date = cookie.expires instanceof Date ? cookie.expires : new Date(cookie.expires);
    if (Number.isNaN(date.getTime())) throw new Error(`invalid expires of cookie '${cookie.name}': ${JSON.stringify(cookie.expires)}`);
    text += `; Expires=${date.toUTCString()}`;
  }
  if (cookie.maxAge !== undefined && cookie.maxAge !== null) text += `; Max-Age=${Math.trunc(Number(cookie.maxAge))}`;
  if (cookie.secure) text += '; Secure';
  if (cookie.httpOnly) text += '; HttpOnly';
  if (cookie.sameSite) {
    const sameSite = SAME_SITE[String(cookie.sameSite).toLowerCase()];
    if (!sameSite) throw new Error(`invalid sameSite of cookie '${cookie.name}': ${JSON.stringify(cookie.sameSite)} (Strict, Lax or None)`);
    text += `; SameSite=${sameSite}`;
  }
  return text;
}

// JS -> TypedData for an http output ({status|statusCode, headers, body}, or context.res).
function toHttpTypedData(value) {
  if (value === null || value === undefined) return NULL_TYPED;
  // A bare value (string, Buffer, number) returned for an http binding is the body.
  if (typeof value !== 'object' || asBuffer(value) !== undefined || Array.isArray(value)) {
    value = { body: value };
  }
  const http = { status_code: 0, headers: {} };

  let status = value.statusCode;
  if (status === undefined || status === null) {
    status = value.status;
    if (typeof status === 'function') status = undefined; // HttpResponse.status() method
  }
  if (status !== undefined && status !== null && status !== '') {
    const code = Number(status);
    if (!Number.isInteger(code) || code < 100 || code > 999) {
      throw new Error(`invalid HTTP status code: ${JSON.stringify(status)}`);
    }
    http.status_code = code;
  }

  const headers = value.headers;
  if (headers && typeof headers === 'object') {
    for (const key in headers) {
      const v = headers[key];
      if (v === undefined || v === null) continue;
      if (key.length === 10 && key.toLowerCase() === 'set-cookie') {
        // One Set-Cookie header each: cookie values cannot be joined with commas.
        if (!http.set_cookies) http.set_cookies = [];
        if (Array.isArray(v)) for (const c of v) http.set_cookies.push(String(c));
        else http.set_cookies.push(String(v));
        continue;
      }
      http.headers[key] = Array.isArray(v) ? v.join(', ') : String(v);
    }
  }
  const cookies = value.cookies;
  if (Array.isArray(cookies) && cookies.length > 0) {
    if (!http.set_cookies) http.set_cookies = [];
    for (const cookie of cookies) http.set_cookies.push(serializeCookie(cookie));
  }

  const body = value.body;
  if (body !== undefined && body !== null) {
    if (typeof body === 'string') {
      http.body = { string: body };
    } else {
      const buffer = typeof body === 'object' ? asBuffer(body) : undefined;
      if (buffer !== undefined) {
        http.body = { bytes: buffer };
      } else {
        http.body = { json: JSON.stringify(body) };
        if (!hasHeader(http.headers, 'content-type')) http.headers['content-type'] = 'application/json';
      }
    }
  }
  return { http };
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

// v3 camel-cases binding data keys ("Query" -> "query", "Properties.ContentLength" ->
// "properties.contentLength"). Header and query names are user data and stay as sent.
function camelCaseKeys(obj) {
  const out = {};
  for (const key in obj) {
    const value = obj[key];
    const camel = key.length > 0 ? key[0].toLowerCase() + key.slice(1) : key;
    out[camel] = isPlainObject(value) && camel !== 'headers' && camel !== 'query'
      ? camelCaseKeys(value)
      : value;
  }
  return out;
}

function fromTriggerMetadata(metadata) {
  const out = {};
  for (const key in metadata) {
    const value = fromTypedData(metadata[key], 'UNDEFINED');
    const camel = key.length > 0 ? key[0].toLowerCase() + key.slice(1) : key;
    out[camel] = isPlainObject(value) && camel !== 'headers' && camel !== 'query'
      ? camelCaseKeys(value)
      : value;
  }
  return out;
}

// A timerTrigger's payload as Azure's host sends it ({"Schedule":{"AdjustForDST":true},"ScheduleStatus":
// {"Last","Next","LastUpdated"} or null,"IsPastDue":bool}) becomes the object Azure's Node v3 worker gives
// context.bindings.<name>: the same with camelCase keys at every level ({ schedule: { adjustForDST },
// scheduleStatus: { last, next, lastUpdated }, isPastDue }).
function toTimerObject(value) {
  if (typeof value === 'string') value = JSON.parse(value);
  else if (Buffer.isBuffer(value)) value = JSON.parse(value.toString('utf8'));
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(`a timer payload is a JSON object, not ${Array.isArray(value) ? 'an array' : typeof value}`);
  }
  return camelCaseKeys(value);
}

function camelCaseKeys(value) {
  if (Array.isArray(value)) return value.map(camelCaseKeys);
  if (value === null || typeof value !== 'object') return value;
  const out = {};
  for (const key of Object.keys(value)) {
    out[key.length > 0 ? key[0].toLowerCase() + key.slice(1) : key] = camelCaseKeys(value[key]);
  }
  return out;
}

module.exports = {
  toTimerObject,
  fromTypedData,
  toTypedData,
  toBlobTypedData,
  toHttpTypedData,
  fromTriggerMetadata,
  asBuffer,
  serializeCookie,
};
