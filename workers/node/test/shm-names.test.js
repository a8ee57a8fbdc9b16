'use strict';
// The Node worker's shared-memory names are the protocol's: protos/shared-memory.json, against
// which the host (C#) and the Python worker check theirs too.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const names = require('../lib/shm-names');
const shm = require('../lib/shm');

const spec = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'protos', 'shared-memory.json'), 'utf8'));

test('directory and file prefixes are the spec\'s', () => {
  assert.equal(names.ROOT, spec.root);
  assert.equal(names.INSTANCE_DIRECTORY_PREFIX, spec.instanceDirectory.prefix);
  assert.deepEqual([names.SLAB_SEGMENT, names.LARGE_OBJECT, names.TEMPORARY],
    [spec.files.slabSegment, spec.files.largeObject, spec.files.temporary]);
  assert.equal(names.HOST_NUMBER_DIGITS, spec.files.hostNumberDigits);
  assert.equal(names.WORKER_OUTPUT, spec.files.workerOutput.prefix);
});

test('capability names are the spec\'s', () => {
  const caps = spec.capabilities;
  assert.deepEqual(
    [names.SHARED_MEMORY_CAPABILITY, names.DIRECTORY_CAPABILITY, names.MIN_BYTES_CAPABILITY, names.RELEASE_CAPABILITY],
    [caps.sharedMemory, caps.directory, caps.minBytes, caps.release]);
});

test('worker output files are named as the spec says', () => {
  assert.equal(spec.files.workerOutput.format, 'w{pid}-{counter}');
  for (const example of spec.files.workerOutput.examples) {
    assert.equal(names.workerOutputFile(example.pid, example.counter), example.name);
  }
});

test('the shared-memory module uses the names module', () => {
  // shm.js keeps its exported CAPABILITY for its callers; its value comes from shm-names.js only.
  assert.equal(shm.CAPABILITY, names.SHARED_MEMORY_CAPABILITY);
});
