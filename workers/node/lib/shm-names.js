'use strict';
// The shared-memory naming protocol between the host and this worker, in one place. The host
// (C#: FaaST.Cachelet.Memory.SharedMemoryNames) and the Python worker (faast_worker.shm_names)
// define the same names; all three are checked against protos/shared-memory.json by a test in
// each language (here: test/shm-names.test.js).

// Instance directories: ROOT/faast-<app>-<pid> (the host names them; a worker is told its
// directory in the handshake).
const ROOT = '/dev/shm';
const INSTANCE_DIRECTORY_PREFIX = 'faast-';

// Files of an instance directory. The host's own are a prefix and a number: slab segments,
// large objects (adopted outputs among them) and temporary files (objects larger than the
// cache, peer transfers spilled to a file).
const SLAB_SEGMENT = 's';
const LARGE_OBJECT = 'l';
const TEMPORARY = 't';
const HOST_NUMBER_DIGITS = 6;
// A worker writes each large output to a new file of its own: w<pid>-<counter>.
const WORKER_OUTPUT = 'w';

// Capabilities of the handshake (WorkerInitRequest / WorkerInitResponse).
const SHARED_MEMORY_CAPABILITY = 'shared_memory';
const DIRECTORY_CAPABILITY = 'shared_memory_dir';
const MIN_BYTES_CAPABILITY = 'shared_memory_min_bytes';
const RELEASE_CAPABILITY = 'shared_memory_release';

// The file a worker writes its counter-th large output to.
function workerOutputFile(pid, counter) {
  return `${WORKER_OUTPUT}${pid}-${counter}`;
}

module.exports = {
  ROOT, INSTANCE_DIRECTORY_PREFIX, SLAB_SEGMENT, LARGE_OBJECT, TEMPORARY, HOST_NUMBER_DIGITS, WORKER_OUTPUT,
  SHARED_MEMORY_CAPABILITY, DIRECTORY_CAPABILITY, MIN_BYTES_CAPABILITY, RELEASE_CAPABILITY, workerOutputFile,
};
