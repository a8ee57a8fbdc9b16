'use strict';
// Shared-memory blob data (the cachelet): handshake, inputs read from segment files in a
// /dev/shm directory, outputs written to new files there. Real worker.js, fake host.
const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const { startHost, typed, openPaths, SHM_MIN_BYTES } = require('../test-support/fake-host');
const { MAX_SLABS } = require('../lib/shm');

const PAYLOAD_OFFSET = 4096;
const PAYLOAD = Buffer.from('zero-copy żółw '.repeat(100)); // non-ASCII: STRING must decode UTF-8

// A slab-like segment file: filler bytes, the payload at `offset`, more filler.
function writeSegment(dir, name, payload = PAYLOAD, offset = PAYLOAD_OFFSET) {
  const content = Buffer.alloc(Math.max(3 * 4096, offset + payload.length), 0xee);
  payload.copy(content, offset);
  const file = path.join(dir, name);
  fs.writeFileSync(file, content);
  return file;
}

function ok(r) {
  assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
  return r;
}

describe('shared memory handshake', () => {
  test('accepted when the offered directory exists', async (t) => {
    const host = await startHost();
    t.after(() => host.stop());
    const caps = host.shmCapabilities();
    const init = (await host.init(caps)).worker_init_response;
    assert.equal(init.result.status, 'SUCCESS');
    assert.deepEqual({ ...init.capabilities }, { concurrent: '1', shared_memory: '1' });
    assert.ok(host.logs.some((l) => l.message.includes('shared memory on') && l.message.includes(caps.shared_memory_dir)));
  });

  for (const [what, dir, reason] of [
    ['a missing directory', '/dev/shm/faast-does-not-exist-xyz', 'does not exist'],
    ['a relative directory', 'relative/dir', 'not absolute'],
    ['no directory', undefined, 'offered no shared_memory_dir'],
  ]) {
    test(`declined for ${what}, with a warning saying why`, async (t) => {
      const host = await startHost();
      t.after(() => host.stop());
      const caps = { shared_memory: '1', shared_memory_min_bytes: '1024' };
      if (dir !== undefined) caps.shared_memory_dir = dir;
      const init = (await host.init(caps)).worker_init_response;
      assert.equal(init.result.status, 'SUCCESS');
      assert.deepEqual({ ...init.capabilities }, { concurrent: '1' });
      await new Promise((r) => setImmediate(r));
      const warnings = host.logs.filter((l) => l.level === 'WARNING').map((l) => l.message);
      assert.ok(warnings.some((m) => m.includes('shared memory declined') && m.includes(reason)), JSON.stringify(warnings));
    });
  }
});

const APP = {
  // Reports what each input looked like.
  'reader/index.js': `module.exports = async function (context, bin, str, auto) {
    const show = (v) => Buffer.isBuffer(v) ? { buffer: v.toString('hex') } : { string: v };
    return { bin: show(bin), str: show(str), auto: show(auto) };
  };`,
  // Two invocations at once: each waits until the other has its input too.
  'twice/index.js': `let waiting = null;
  module.exports = async function (context, doc) {
    if (waiting === null) {
      await new Promise((resolve) => { waiting = resolve; });  // the first one waits here
    } else {
      const release = waiting;
      waiting = null;
      release();
    }
    return doc.toString('hex');
  };`,
  'writer/index.js': `module.exports = async function (context, req) {
    const n = Number(req.params.n);
    context.bindings.at = Buffer.alloc(n, 'a');
    context.bindings.below = Buffer.alloc(n - 1, 'b');
    context.bindings.text = 'ż'.repeat(n / 2);          // n bytes in UTF-8
    context.bindings.typedArray = new Uint8Array(n).fill(0x76);
    context.bindings.queue = Buffer.alloc(n, 'q');      // not a blob binding: inline
    context.res = { body: Buffer.alloc(n, 'h') };        // HTTP: always inline
  };`,
  'writerReturn/index.js': `module.exports = async function (context, req) {
    return Buffer.alloc(Number(req.params.n) + 1, 'r');
  };`,
  'broken/index.js': `module.exports = async function (context, req) {
    context.bindings.big = Buffer.alloc(100000, 'x');
    context.res = { status: 'not-a-status' };   // cannot be sent: fails after writing 'big'
  };`,
};

const READER_BINDINGS = {
  bin: { type: 'blobTrigger', direction: 'IN', data_type: 'BINARY' },
  str: { type: 'blob', direction: 'IN', data_type: 'STRING' },
  auto: { type: 'blob', direction: 'IN' },
  $return: { type: 'blob', direction: 'OUT' },
};
const HTTP_IN = { type: 'httpTrigger', direction: 'IN' };

describe('shared memory', () => {
  let host;
  let dir;
  let pid;
  before(async () => {
    host = await startHost({ files: APP });
    const init = (await host.init(host.shmCapabilities())).worker_init_response;
    assert.equal(init.capabilities.shared_memory, '1');
    dir = host.shmDir;
    pid = host.child.pid;
    const loads = {
      reader: READER_BINDINGS,
      twice: { doc: { type: 'blobTrigger', direction: 'IN', data_type: 'BINARY' }, $return: { type: 'queue', direction: 'OUT' } },
      writer: {
        req: HTTP_IN, at: { type: 'blob', direction: 'OUT' }, below: { type: 'blob', direction: 'OUT' },
        text: { type: 'blob', direction: 'OUT' }, typedArray: { type: 'blob', direction: 'OUT' },
        queue: { type: 'queue', direction: 'OUT' }, res: { type: 'http', direction: 'OUT' },
      },
      writerReturn: { req: HTTP_IN, $return: { type: 'blob', direction: 'OUT' } },
      broken: { req: HTTP_IN, big: { type: 'blob', direction: 'OUT' }, res: { type: 'http', direction: 'OUT' } },
    };
    for (const [name, bindings] of Object.entries(loads)) {
      const r = await host.load(name, { name, script_file: `${name}/index.js`, bindings });
      assert.equal(r.result.status, 'SUCCESS', r.result.exception && r.result.exception.message);
    }
  });
  after(() => host && host.stop());

  function readAll(segment, offset = PAYLOAD_OFFSET, length = PAYLOAD.length) {
    const ref = typed.shmBlob(segment, offset, length);
    return host.invoke('reader', { input_data: [{ name: 'bin', data: ref }, { name: 'str', data: ref }, { name: 'auto', data: ref }] });
  }

  for (const segment of ['s-slab-1', 'l-large-1']) {
    test(`input from segment '${segment}' at an offset: Buffer content, STRING decoded as UTF-8`, async () => {
      const file = writeSegment(dir, segment);
      const r = ok(await readAll(segment));
      const out = JSON.parse(r.return_value.json);
      assert.deepEqual(out, {
        bin: { buffer: PAYLOAD.toString('hex') },
        str: { string: PAYLOAD.toString('utf8') },
        auto: { buffer: PAYLOAD.toString('hex') },
      });
      const open = openPaths(pid).filter((p) => p === file);
      if (segment.startsWith('s')) assert.equal(open.length, 1, 'a slab keeps one cached descriptor');
      else assert.equal(open.length, 0, "no descriptor of an 'l' segment stays open after the invocation");
    });
  }

  test('inline blobs still work with shared memory on', async () => {
    const b = typed.blob(PAYLOAD);
    const r = ok(await host.invoke('reader', { input_data: [{ name: 'bin', data: b }, { name: 'str', data: b }, { name: 'auto', data: b }] }));
    assert.equal(JSON.parse(r.return_value.json).str.string, PAYLOAD.toString('utf8'));
  });

  test('an empty range and an empty segment give empty values', async () => {
    fs.writeFileSync(path.join(dir, 'l-empty'), '');
    writeSegment(dir, 's-e');
    const r = ok(await host.invoke('reader', { input_data: [
      { name: 'bin', data: typed.shmBlob('l-empty', 0, 0) },
      { name: 'str', data: typed.shmBlob('s-e', 100, 0) },
      { name: 'auto', data: typed.shmBlob('s-e', 0, 0) },
    ] }));
    assert.deepEqual(JSON.parse(r.return_value.json), { bin: { buffer: '' }, str: { string: '' }, auto: { buffer: '' } });
  });

  const BAD = [
    ['../escape', 0, 4, /invalid segment name/],
    ['sub/seg', 0, 4, /invalid segment name/],
    ['..', 0, 4, /invalid segment name/],
    ['', 0, 4, /invalid segment name/],
    ['l-missing', 0, 4, /segment 'l-missing' not found/],
    ['s-bad', PAYLOAD_OFFSET, 10 * 4096, /outside segment 's-bad'/],
    ['s-bad', -1, 4, /outside segment 's-bad'/],
    ['s-bad', 0, -4, /outside segment 's-bad'/],
    ['l-link', 0, 4, /cannot open segment 'l-link'/],  // a symlink: not followed
    ['l-dir', 0, 4, /not a regular file/],
  ];
  for (const [segment, offset, length, expected] of BAD) {
    test(`bad reference (segment '${segment}', offset ${offset}, length ${length}) fails naming the binding`, async () => {
      writeSegment(dir, 's-bad');
      if (!fs.existsSync(path.join(dir, 'l-link'))) fs.symlinkSync(path.join(dir, 's-bad'), path.join(dir, 'l-link'));
      fs.mkdirSync(path.join(dir, 'l-dir'), { recursive: true });
      const r = await host.invoke('reader', { input_data: [
        { name: 'bin', data: typed.blob('fine') },
        { name: 'str', data: typed.shmBlob(segment, offset, length) },
        { name: 'auto', data: typed.none() },
      ] });
      assert.equal(r.result.status, 'FAILURE');
      const message = r.result.exception.message;
      assert.ok(message.includes("input binding 'str'") && message.includes(`segment '${segment}'`), message);
      assert.match(message, expected);
      assert.equal(openPaths(pid).filter((p) => p.includes('l-link') || p.includes('l-dir')).length, 0);
    });
  }

  for (const segment of ['s-shared', 'l-shared']) {
    test(`two invocations read segment '${segment}' at once`, async () => {
      writeSegment(dir, segment);
      const ref = typed.shmBlob(segment, PAYLOAD_OFFSET, PAYLOAD.length);
      // The first invocation only completes once the second one has run with its input.
      const results = await Promise.all([0, 1].map(() => host.invoke('twice', { input_data: [{ name: 'doc', data: ref }] })));
      for (const r of results) assert.equal(ok(r).return_value.string, PAYLOAD.toString('hex'));
    });
  }

  test('a slab grown after it was opened is read up to its new size', async () => {
    const file = writeSegment(dir, 's-grow');
    ok(await readAll('s-grow'));
    fs.appendFileSync(file, Buffer.concat([Buffer.alloc(8192), Buffer.from('tail')]));
    const end = fs.statSync(file).size;
    const r = ok(await readAll('s-grow', end - 4, 4));
    assert.equal(JSON.parse(r.return_value.json).str.string, 'tail');
  });

  test('slab descriptors are bounded, and a deleted slab is closed', async () => {
    const names = Array.from({ length: MAX_SLABS + 4 }, (_, i) => `s-many-${i}`);
    for (const name of [...names, 's-many-next']) {
      writeSegment(dir, name);
      if (name === 's-many-next') fs.unlinkSync(path.join(dir, names[names.length - 1]));
      ok(await readAll(name));
    }
    const open = new Set(openPaths(pid).map((p) => path.basename(p).replace(/ \(deleted\)$/, '')));
    const slabsOpen = [...names, 's-many-next'].filter((n) => open.has(n));
    assert.ok(slabsOpen.length <= MAX_SLABS, `${slabsOpen.length} slab descriptors open`);
    assert.ok(open.has('s-many-next'));
    assert.ok(!open.has(names[0]) && !open.has(names[names.length - 1]));
  });

  function shmFile(td) {
    assert.equal(td.data, 'blob', JSON.stringify(td));
    assert.equal(td.blob.content, 'shared_memory');
    const ref = td.blob.shared_memory;
    assert.equal(ref.offset, 0);
    assert.match(ref.segment, new RegExp(`^w${pid}-\\d+$`));
    const file = path.join(dir, ref.segment);
    const st = fs.statSync(file);
    assert.equal(st.mode & 0o777, 0o600);
    assert.equal(st.size, ref.length);
    assert.equal(td.blob.length, ref.length);
    return fs.readFileSync(file);
  }

  function outputsOf(r) {
    return Object.fromEntries(ok(r).output_data.map((o) => [o.name, o.data]));
  }

  function wFiles() {
    return fs.readdirSync(dir).filter((n) => n.startsWith('w'));
  }

  test('blob outputs at the threshold are written to new shared-memory files', async () => {
    const n = SHM_MIN_BYTES;
    const req = typed.http({ params: { n: String(n) } });
    const out = outputsOf(await host.invoke('writer', { input_data: [{ name: 'req', data: req }] }));
    assert.deepEqual(shmFile(out.at), Buffer.alloc(n, 'a'));
    assert.deepEqual(shmFile(out.text), Buffer.from('ż'.repeat(n / 2)));
    assert.deepEqual(shmFile(out.typedArray), Buffer.alloc(n, 0x76));
    assert.equal(out.below.data, 'bytes');
    assert.deepEqual(Buffer.from(out.below.bytes), Buffer.alloc(n - 1, 'b'));
    assert.equal(out.queue.data, 'bytes');
    assert.equal(out.res.data, 'http');
    assert.deepEqual(Buffer.from(out.res.http.body.bytes), Buffer.alloc(n, 'h'));
    const ret = ok(await host.invoke('writerReturn', { input_data: [{ name: 'req', data: req }] }));
    assert.deepEqual(shmFile(ret.return_value), Buffer.alloc(n + 1, 'r'));
    // Never reused: every output got its own file.
    const names = [out.at, out.text, out.typedArray, ret.return_value].map((td) => td.blob.shared_memory.segment);
    assert.equal(new Set(names).size, names.length);
    for (const name of names) fs.unlinkSync(path.join(dir, name)); // the host's part
  });

  test('blob outputs below the threshold stay inline', async () => {
    const n = SHM_MIN_BYTES / 2;
    const req = typed.http({ params: { n: String(n) } });
    const out = outputsOf(await host.invoke('writer', { input_data: [{ name: 'req', data: req }] }));
    assert.equal(out.at.data, 'bytes');
    assert.equal(out.text.data, 'string');
    assert.equal(out.text.string, 'ż'.repeat(n / 2));
    const ret = ok(await host.invoke('writerReturn', { input_data: [{ name: 'req', data: req }] }));
    assert.equal(ret.return_value.data, 'bytes');
    assert.deepEqual(wFiles(), []);
  });

  test('a failing invocation removes the output files it wrote', async () => {
    const r = await host.invoke('broken', { input_data: [{ name: 'req', data: typed.http() }] });
    assert.equal(r.result.status, 'FAILURE');
    assert.match(r.result.exception.message, /invalid HTTP status code/);
    assert.deepEqual(wFiles(), []);
  });
});

test('blob outputs fall back inline, with a warning, when the directory is gone', async (t) => {
  const host = await startHost({ files: APP });
  t.after(() => host.stop());
  await host.init(host.shmCapabilities());
  const bindings = { req: HTTP_IN, $return: { type: 'blob', direction: 'OUT' } };
  ok(await host.load('writerReturn', { name: 'writerReturn', script_file: 'writerReturn/index.js', bindings }));
  fs.rmSync(host.shmDir, { recursive: true });
  const r = ok(await host.invoke('writerReturn', { invocation_id: 'gone-1', input_data: [{ name: 'req', data: typed.http({ params: { n: '5000' } }) }] }));
  assert.equal(r.return_value.data, 'bytes');
  assert.deepEqual(Buffer.from(r.return_value.bytes), Buffer.alloc(5001, 'r'));
  assert.ok(host.logsFor('gone-1').some((l) => l.level === 'WARNING' && l.message.includes('sending it inline')));
});
