'use strict';
// Non-HTTP bindings: blob inputs/outputs, typed inputs, argument order, output rules.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startHost, typed, decode } = require('../test-support/fake-host');

const APP = {
  // Copies the trigger blob to `out` and the STRING input blob to `outStr`; `report` says what it saw.
  'blobs/index.js': `module.exports = async function (context, myBlob, other) {
    context.bindings.report = {
      triggerIsBuffer: Buffer.isBuffer(myBlob),
      triggerText: Buffer.isBuffer(myBlob) ? myBlob.toString() : null,
      otherType: other === null ? 'null' : typeof other,
      other,
      sameAsBindings: context.bindings.myBlob === myBlob && context.bindings.other === other,
      argCount: arguments.length,
    };
    if (myBlob) context.bindings.out = Buffer.concat([myBlob, Buffer.from('!')]);
    if (other !== null) context.bindings.outStr = 'str:' + other;
  };`,
  // Arguments: context, trigger, then inputs in metadata order.
  'args/index.js': `module.exports = async function (context, trigger, first, second, third) {
    return { trigger, first, second: Buffer.isBuffer(second) ? 'buffer:' + second.toString() : second, third,
      bindings: Object.keys(context.bindings).sort() };
  };`,
  'bag/index.js': `module.exports = async function (context) {
    context.bindings.viaBindings = 'from bindings';
    return { out1: 'from return', notABinding: 1 };
  };`,
  'kinds/index.js': `module.exports = async function (context, t) {
    context.bindings.s = 'text';
    context.bindings.b = Buffer.from('buf');
    context.bindings.u = new Uint8Array([1, 2]);
    context.bindings.o = { n: 1 };
    context.bindings.num = 5;
    context.bindings.nul = null;
    // 'undef' left undefined: not sent
    return 'ignored without $return';
  };`,
};

const BLOB_BINDINGS = {
  myBlob: { type: 'blobTrigger', direction: 'IN', data_type: 'BINARY' },
  other: { type: 'blob', direction: 'IN', data_type: 'STRING' },
  out: { type: 'blob', direction: 'OUT' },
  outStr: { type: 'blob', direction: 'OUT' },
  report: { type: 'blob', direction: 'OUT' },
};

describe('bindings', () => {
  let host;
  before(async () => {
    host = await startHost({ files: APP });
    await host.init();
    const loads = [
      ['blobs', BLOB_BINDINGS],
      ['args', {
        first: { type: 'table', direction: 'IN' },
        second: { type: 'blob', direction: 'IN' },
        trigger: { type: 'queueTrigger', direction: 'IN' },
        third: { type: 'blob', direction: 'IN', data_type: 'STRING' },
        $return: { type: 'queue', direction: 'OUT' },
      }],
      ['bag', { t: { type: 'timerTrigger', direction: 'IN' }, out1: { type: 'queue', direction: 'OUT' }, viaBindings: { type: 'queue', direction: 'OUT' } }],
      ['kinds', {
        t: { type: 'queueTrigger', direction: 'IN' },
        s: { type: 'blob', direction: 'OUT' }, b: { type: 'blob', direction: 'OUT' }, u: { type: 'blob', direction: 'OUT' },
        o: { type: 'queue', direction: 'OUT' }, num: { type: 'queue', direction: 'OUT' },
        nul: { type: 'queue', direction: 'OUT' }, undef: { type: 'queue', direction: 'OUT' },
      }],
    ];
    for (const [name, bindings] of loads) {
      const r = await host.load(name, { name, script_file: `${name}/index.js`, bindings });
      assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    }
  });
  after(() => host && host.stop());

  function outputs(r) {
    assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    return Object.fromEntries(r.output_data.map((o) => [o.name, decode(o.data)]));
  }

  test('blob input: Buffer for a binary blob, string for a STRING blob; blob outputs Buffer and string', async () => {
    const r = await host.invoke('blobs', { input_data: [
      { name: 'myBlob', data: typed.blob('trigger-bytes', 'c/trigger.bin') },
      { name: 'other', data: typed.blob('other text', 'c/other.txt') },
    ] });
    const out = outputs(r);
    assert.deepEqual(out.report.value, {
      triggerIsBuffer: true, triggerText: 'trigger-bytes', otherType: 'string', other: 'other text', sameAsBindings: true, argCount: 3,
    });
    assert.deepEqual(out.out, { kind: 'bytes', value: Buffer.from('trigger-bytes!') });
    assert.deepEqual(out.outStr, { kind: 'string', value: 'str:other text' });
  });

  test('blob input as plain bytes TypedData follows the binding data type too', async () => {
    const r = await host.invoke('blobs', { input_data: [
      { name: 'myBlob', data: typed.bytes('raw') },
      { name: 'other', data: typed.bytes('raw other') },
    ] });
    const out = outputs(r);
    assert.equal(out.report.value.triggerIsBuffer, true);
    assert.equal(out.report.value.other, 'raw other');
  });

  test('a missing input blob (unset TypedData) is null, and its output is not sent', async () => {
    const r = await host.invoke('blobs', { input_data: [
      { name: 'myBlob', data: typed.blob('x') },
      { name: 'other', data: typed.none() },
    ] });
    const out = outputs(r);
    assert.equal(out.report.value.otherType, 'null');
    assert.equal(out.report.value.sameAsBindings, true);
    assert.equal(out.outStr, undefined, 'undefined outputs are not sent');
  });

  test('a shared-memory blob fails the invocation with a clear message when shared memory was not negotiated', async () => {
    const r = await host.invoke('blobs', { input_data: [
      { name: 'myBlob', data: { blob: { name: 'c/big.bin', length: 10, shared_memory: { segment: 'seg', offset: 0, length: 10, version: 'v' } } } },
      { name: 'other', data: typed.none() },
    ] });
    assert.equal(r.result.status, 'FAILURE');
    assert.match(r.result.exception.message, /shared memory was not negotiated/);
    assert.match(r.result.exception.message, /input binding 'myBlob'.*segment 'seg'/);
    assert.equal(r.result.exception.source, 'blobs');
  });

  test('arguments: context, trigger, then other inputs in metadata order (whatever the input_data order)', async () => {
    const r = await host.invoke('args', { input_data: [
      { name: 'third', data: typed.bytes('three') },
      { name: 'second', data: typed.bytes('two') },
      { name: 'first', data: typed.json({ row: 1 }) },
      { name: 'trigger', data: typed.string('msg') },
    ] });
    assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    assert.deepEqual(decode(r.return_value).value, {
      trigger: 'msg', first: { row: 1 }, second: 'buffer:two', third: 'three', bindings: ['first', 'second', 'third', 'trigger'],
    });
  });

  test('without $return, a returned object supplies named outputs; return_value is not sent', async () => {
    const r = await host.invoke('bag', { input_data: [{ name: 't', data: typed.json({}) }] });
    const out = outputs(r);
    assert.deepEqual(out.out1, { kind: 'string', value: 'from return' });
    assert.deepEqual(out.viaBindings, { kind: 'string', value: 'from bindings' });
    assert.equal(out.notABinding, undefined);
    assert.equal(r.return_value, null);
  });

  test('output kinds: string, Buffer, Uint8Array, object, number, null; undefined is not sent', async () => {
    const r = await host.invoke('kinds', { input_data: [{ name: 't', data: typed.string('go') }] });
    const out = outputs(r);
    assert.deepEqual(out.s, { kind: 'string', value: 'text' });
    assert.deepEqual(out.b, { kind: 'bytes', value: Buffer.from('buf') });
    assert.deepEqual(out.u, { kind: 'bytes', value: Buffer.from([1, 2]) });
    assert.deepEqual(out.o, { kind: 'json', value: { n: 1 } });
    assert.deepEqual(out.num, { kind: 'json', value: 5 });
    assert.deepEqual(out.nul, { kind: 'none', value: null });
    assert.ok(!('undef' in out));
    assert.equal(r.return_value, null);
  });
});
