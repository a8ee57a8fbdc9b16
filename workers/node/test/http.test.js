'use strict';
// HTTP trigger: the v3 request object, binding data, and every way of producing a response.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startHost, typed, decode } = require('../test-support/fake-host');

const HTTP_BINDINGS = { req: { type: 'httpTrigger', direction: 'IN' }, res: { type: 'http', direction: 'OUT' } };
const RETURN_BINDINGS = { req: { type: 'httpTrigger', direction: 'IN' }, $return: { type: 'http', direction: 'OUT' } };

const APP = {
  // Reports what it received as a JSON response.
  'echo/index.js': `module.exports = async function (context, req) {
    context.res = { body: {
      method: req.method, url: req.url, originalUrl: req.originalUrl,
      headers: req.headers, query: req.query, params: req.params,
      body: req.body, bodyType: typeof req.body, rawBody: req.rawBody,
      bufferBody: Buffer.isBuffer(req.bufferBody) ? req.bufferBody.toString('base64') : null,
      getHeader: req.get('X-Custom'),
      sameReq: context.req === req && context.bindings.req === req,
      bindingData: context.bindingData,
    } };
  };`,
  'respond/index.js': `module.exports = async function (context, req) {
    switch (req.query.mode) {
      case 'string': context.res = { status: 201, headers: { 'x-a': 'b', 'x-n': 7 }, body: 'hello' }; break;
      case 'buffer': context.res = { body: Buffer.from([0, 1, 2, 255]) }; break;
      case 'uint8': context.res = { body: new Uint8Array([9, 8, 7]) }; break;
      case 'json': context.res = { body: { a: 1, list: [true, null] } }; break;
      case 'json-ct': context.res = { headers: { 'Content-Type': 'application/problem+json' }, body: { a: 2 } }; break;
      case 'statusCode': context.res = { statusCode: '404', body: 'nope' }; break;
      case 'empty': break;
      case 'methods': context.res.status(202).set('X-M', 'v').json({ ok: true }); break;
      case 'bindings': context.bindings.res = { status: 203, body: 'via bindings' }; context.res = { status: 500 }; break;
      case 'bad-status': context.res = { status: 'teapot' }; break;
      case 'cookies': context.res = {
        headers: { 'Set-Cookie': ['a=1; Path=/', 'b=2'], 'x-list': ['p', 'q'] },
        cookies: [
          { name: 'session', value: 'abc', path: '/', httpOnly: true, secure: true, sameSite: 'Lax', maxAge: 3600 },
          { name: 'gone', value: '', expires: new Date(Date.UTC(2020, 0, 2, 3, 4, 5)), domain: 'example.com' },
        ],
        body: 'cookies' }; break;
      case 'bad-cookie': context.res = { cookies: [{ value: 'no name' }] }; break;
    }
  };`,
  'callback/index.js': `module.exports = function (context, req) {
    setTimeout(() => { context.res = { status: 200, body: 'cb:' + req.query.name }; context.done(); }, 5);
  };`,
  'send/index.js': `module.exports = function (context, req) { context.res.send('sent'); };`,
  'ret/index.js': `module.exports = async function (context, req) {
    if (req.query.mode === 'res') { context.res = { status: 206, body: 'from context.res' }; return undefined; }
    context.res = { status: 500, body: 'ignored' };
    return { status: 200, headers: { 'x-r': '1' }, body: 'from return' };
  };`,
  'bare/index.js': `module.exports = async function () { return 'just a string'; };`,
  'size/index.js': `module.exports = async function (context, req) { context.res = { body: String(req.bufferBody.length) }; };`,
};

describe('http trigger', () => {
  let host;
  before(async () => {
    host = await startHost({ files: APP });
    await host.init();
    const loads = [
      ['echo', HTTP_BINDINGS], ['respond', HTTP_BINDINGS], ['callback', HTTP_BINDINGS], ['send', HTTP_BINDINGS],
      ['ret', RETURN_BINDINGS], ['bare', RETURN_BINDINGS], ['size', HTTP_BINDINGS],
    ];
    for (const [name, bindings] of loads) {
      const r = await host.load(name, { name, script_file: `${name}/index.js`, bindings });
      assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    }
  });
  after(() => host && host.stop());

  async function invokeHttp(functionId, request, triggerMetadata = {}) {
    const r = await host.invoke(functionId, { input_data: [{ name: 'req', data: typed.http(request) }], trigger_metadata: triggerMetadata });
    assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    return r;
  }
  function httpOut(r, name = 'res') {
    const out = r.output_data.find((o) => o.name === name);
    assert.ok(out, `output '${name}' present`);
    return decode(out.data);
  }
  const echo = async (request, triggerMetadata) => httpOut(await invokeHttp('echo', request, triggerMetadata)).body.value;

  test('request fields: method, url, lower-cased headers, query, route params', async () => {
    const got = await echo({
      method: 'GET', url: 'http://localhost/api/items/42?q=1', headers: { 'X-Custom': 'yes', Accept: 'text/plain' },
      query: { q: '1' }, params: { id: '42' },
    });
    assert.equal(got.method, 'GET');
    assert.equal(got.url, 'http://localhost/api/items/42?q=1');
    assert.equal(got.originalUrl, got.url);
    assert.deepEqual(got.headers, { 'x-custom': 'yes', accept: 'text/plain' });
    assert.equal(got.getHeader, 'yes');
    assert.deepEqual(got.query, { q: '1' });
    assert.deepEqual(got.params, { id: '42' });
    assert.equal(got.sameReq, true);
    assert.equal(got.body, undefined);
  });

  test('JSON body is parsed; rawBody and bufferBody keep the original', async () => {
    const raw = '{"name":"ann","n":[1,2]}';
    const got = await echo({ method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8' }, body: raw });
    assert.deepEqual(got.body, { name: 'ann', n: [1, 2] });
    assert.equal(got.rawBody, raw);
    assert.equal(Buffer.from(got.bufferBody, 'base64').toString(), raw);
  });

  test('invalid JSON body falls back to the string', async () => {
    const got = await echo({ method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    assert.equal(got.bodyType, 'string');
    assert.equal(got.body, '{not json');
  });

  test('non-JSON body is a string; binary bytes survive in bufferBody', async () => {
    const got = await echo({ method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'plain text' });
    assert.equal(got.body, 'plain text');
    assert.equal(got.rawBody, 'plain text');
    const bytes = Buffer.from([0, 255, 128, 10]);
    const bin = await echo({ method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: bytes });
    assert.deepEqual(Buffer.from(bin.bufferBody, 'base64'), bytes);
  });

  test('bindingData: trigger metadata camel-cased, invocationId, query, headers, route params, sys', async () => {
    const r = await invokeHttp('echo', { query: { q: 'v' }, headers: { 'x-h': '1' }, params: { id: '7' } },
      { Query: typed.json({ q: 'v' }), CustomValue: typed.string('cv'), Nested: typed.json({ InnerKey: 1 }) });
    const bd = httpOut(r).body.value.bindingData;
    assert.equal(bd.invocationId, r.invocation_id);
    assert.deepEqual(bd.query, { q: 'v' });
    assert.deepEqual(bd.headers, { 'x-h': '1' });
    assert.equal(bd.id, '7');
    assert.equal(bd.customValue, 'cv');
    assert.deepEqual(bd.nested, { innerKey: 1 });
    assert.equal(bd.sys.methodName, 'echo');
    assert.ok(!Number.isNaN(Date.parse(bd.sys.utcNow)));
    assert.match(bd.sys.randGuid, /^[0-9a-f-]{36}$/);
  });

  test('response: status, headers and a string body', async () => {
    const res = httpOut(await invokeHttp('respond', { query: { mode: 'string' } }));
    assert.equal(res.status, 201);
    assert.deepEqual({ ...res.headers }, { 'x-a': 'b', 'x-n': '7' });
    assert.deepEqual(res.body, { kind: 'string', value: 'hello' });
  });

  test('response: Buffer and Uint8Array bodies are bytes', async () => {
    const res = httpOut(await invokeHttp('respond', { query: { mode: 'buffer' } }));
    assert.deepEqual(res.body, { kind: 'bytes', value: Buffer.from([0, 1, 2, 255]) });
    const res2 = httpOut(await invokeHttp('respond', { query: { mode: 'uint8' } }));
    assert.deepEqual(res2.body, { kind: 'bytes', value: Buffer.from([9, 8, 7]) });
  });

  test('response: object body is JSON with content-type application/json unless one is set', async () => {
    const res = httpOut(await invokeHttp('respond', { query: { mode: 'json' } }));
    assert.deepEqual(res.body, { kind: 'json', value: { a: 1, list: [true, null] } });
    assert.equal(res.headers['content-type'], 'application/json');
    const res2 = httpOut(await invokeHttp('respond', { query: { mode: 'json-ct' } }));
    assert.deepEqual({ ...res2.headers }, { 'Content-Type': 'application/problem+json' });
    assert.deepEqual(res2.body.value, { a: 2 });
  });

  test('response: statusCode (string) and untouched context.res', async () => {
    const res = httpOut(await invokeHttp('respond', { query: { mode: 'statusCode' } }));
    assert.equal(res.status, 404);
    const empty = httpOut(await invokeHttp('respond', { query: { mode: 'empty' } }));
    assert.equal(empty.status, 0, '0 = host default (200)');
    assert.equal(empty.body.kind, 'none');
  });

  test('response: v3 context.res methods (status/set/json)', async () => {
    const res = httpOut(await invokeHttp('respond', { query: { mode: 'methods' } }));
    assert.equal(res.status, 202);
    assert.equal(res.headers['x-m'], 'v');
    assert.equal(res.headers['content-type'], 'application/json');
    assert.deepEqual(res.body.value, { ok: true });
  });

  test('response: context.bindings.res wins over context.res', async () => {
    const res = httpOut(await invokeHttp('respond', { query: { mode: 'bindings' } }));
    assert.equal(res.status, 203);
    assert.equal(res.body.value, 'via bindings');
  });

  test('response: an invalid status fails the invocation', async () => {
    const r = await host.invoke('respond', { input_data: [{ name: 'req', data: typed.http({ query: { mode: 'bad-status' } }) }] });
    assert.equal(r.result.status, 'FAILURE');
    assert.match(r.result.exception.message, /invalid HTTP status code/);
  });

  test('response: Set-Cookie headers and v3 cookies go out as one Set-Cookie header each', async () => {
    const res = httpOut(await invokeHttp('respond', { query: { mode: 'cookies' } }));
    assert.deepEqual([...res.setCookies], [
      'a=1; Path=/',
      'b=2',
      'session=abc; Path=/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax',
      'gone=; Domain=example.com; Expires=Thu, 02 Jan 2020 03:04:05 GMT',
    ]);
    assert.deepEqual({ ...res.headers }, { 'x-list': 'p, q' });
  });

  test('response: a cookie without a name fails the invocation, saying so', async () => {
    const r = await host.invoke('respond', { input_data: [{ name: 'req', data: typed.http({ query: { mode: 'bad-cookie' } }) }] });
    assert.equal(r.result.status, 'FAILURE');
    assert.match(r.result.exception.message, /invalid cookie/);
  });

  test('callback style: context.res + context.done()', async () => {
    const res = httpOut(await invokeHttp('callback', { query: { name: 'zed' } }));
    assert.equal(res.body.value, 'cb:zed');
  });

  test('callback style: context.res.send() completes the invocation', async () => {
    const res = httpOut(await invokeHttp('send', {}));
    assert.equal(res.body.value, 'sent');
  });

  test('$return http binding: the return value is the response, context.res ignored', async () => {
    const r = await invokeHttp('ret', {});
    assert.equal(r.output_data.length, 0);
    const res = decode(r.return_value);
    assert.equal(res.status, 200);
    assert.equal(res.headers['x-r'], '1');
    assert.equal(res.body.value, 'from return');
  });

  test('$return http binding with nothing returned uses context.res', async () => {
    const r = await invokeHttp('ret', { query: { mode: 'res' } });
    const res = decode(r.return_value);
    assert.equal(res.status, 206);
    assert.equal(res.body.value, 'from context.res');
  });

  test('$return http binding: a bare returned value is the body', async () => {
    const res = decode((await invokeHttp('bare', {})).return_value);
    assert.equal(res.kind, 'http');
    assert.equal(res.body.value, 'just a string');
  });

  test('bodies larger than gRPC\'s 4 MiB default get through', async () => {
    const big = Buffer.alloc(6 * 1024 * 1024, 0x61);
    const res = httpOut(await invokeHttp('size', { method: 'POST', body: big }));
    assert.equal(res.body.value, String(big.length));
  });
});
