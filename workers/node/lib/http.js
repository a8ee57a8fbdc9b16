'use strict';
// The Azure Functions v3 HTTP request/response shapes (req, context.res).

const DONE = Symbol('done');

function isJsonContentType(contentType) {
  if (typeof contentType !== 'string') return false;
  const semi = contentType.indexOf(';');
  const mime = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return mime === 'application/json';
}

// Header keys are lower-cased (v3 contract); most hosts already send them lower-case,
// so only copy the map when needed.
function lowerCaseKeys(map) {
  for (const key in map) {
    if (key !== key.toLowerCase()) {
      const out = {};
      for (const k in map) out[k.toLowerCase()] = map[k];
      return out;
    }
  }
  return map;
}

class HttpRequest {
  constructor(http) {
    this.method = http.method;
    this.url = http.url;
    this.originalUrl = http.url;
    this.headers = lowerCaseKeys(http.headers);
    this.query = http.query;
    this.params = http.params;
    const body = http.body;
    const kind = body && body.data;
    if (kind === 'bytes' || kind === 'string') {
      // rawBody is the text; body is JSON-parsed for application/json (falling back to the
      // text when it does not parse); bufferBody keeps the bytes.
      const buffer = kind === 'bytes' ? body.bytes : Buffer.from(body.string, 'utf8');
      const text = kind === 'bytes' ? buffer.toString('utf8') : body.string;
      this.body = text;
      if (text.length > 0 && isJsonContentType(this.headers['content-type'])) {
        try { this.body = JSON.parse(text); } catch { /* keep the string, as v3 does */ }
      }
      this.rawBody = text;
      this.bufferBody = buffer;
    } else if (kind === 'json') {
      this.rawBody = body.json;
      try { this.body = JSON.parse(body.json); } catch { this.body = body.json; }
      this.bufferBody = Buffer.from(body.json, 'utf8');
    } else {
      this.body = undefined;
      this.rawBody = undefined;
      this.bufferBody = undefined;
    }
  }

  get(field) {
    return this.headers[String(field).toLowerCase()];
  }
}

// context.res: a plain-data object (status/statusCode, headers, body) with the v3
// convenience methods. send/end/json complete the invocation like context.done().
class HttpResponse {
  constructor(done) {
    this.headers = {};
    this.cookies = [];
    this.body = undefined;
    this[DONE] = done; // symbol key: not serialized with the response
  }

  status(statusCode) { this.statusCode = statusCode; return this; }
  setHeader(field, value) { this.headers[String(field).toLowerCase()] = value; return this; }
  header(field, value) { return this.setHeader(field, value); }
  set(field, value) { return this.setHeader(field, value); }
  getHeader(field) { return this.headers[String(field).toLowerCase()]; }
  get(field) { return this.getHeader(field); }
  removeHeader(field) { delete this.headers[String(field).toLowerCase()]; return this; }
  type(contentType) { return this.setHeader('content-type', contentType); }

  end(body) {
    if (body !== undefined) this.body = body;
    if (this.body !== undefined && Buffer.isBuffer(this.body) && !this.getHeader('content-type')) {
      this.type('application/octet-stream');
    }
    if (this[DONE]) this[DONE]();
    return this;
  }

  send(body) { return this.end(body); }
  json(body) { this.type('application/json'); return this.end(body); }
  sendStatus(statusCode) { this.statusCode = statusCode; return this.end(); }
}

module.exports = { HttpRequest, HttpResponse, isJsonContentType };
