'use strict';
// Shared-memory blob data: the cachelet's files under /dev/shm, shared by host and workers.
//
// Negotiated at WorkerInitRequest (capabilities shared_memory, shared_memory_dir,
// shared_memory_min_bytes). Node has no mmap without native addons, so an input is read
// from <dir>/<segment> with one fs.readSync into a Buffer (the one copy the platform
// forces). Descriptors of "s..." slab segments are cached (at most MAX_SLABS, closed when
// the file is gone); other segments ("l..." large objects) are opened for the read and
// closed right after it, so none stays open past the invocation.
// A blob output of at least minBytes is written to a new file "w<pid>-<counter>"
// (O_EXCL, mode 0600) which the host takes over.
const fs = require('fs');
const path = require('path');
const names = require('./shm-names');

// The names themselves are defined in shm-names.js (the protocol's one definition in Node).
const CAPABILITY = names.SHARED_MEMORY_CAPABILITY;
const DIR_CAPABILITY = names.DIRECTORY_CAPABILITY;
const MIN_BYTES_CAPABILITY = names.MIN_BYTES_CAPABILITY;
const DEFAULT_MIN_BYTES = 1 << 20;
const MAX_SLABS = 64; // 64 x 64 MiB slab segments: a 4 GiB cache without reopening
const SLAB_PREFIX = names.SLAB_SEGMENT;
const NOT_ENABLED = 'blob content arrived in shared memory, but shared memory was not negotiated with this worker '
  + '(not offered by the host, or its directory was unusable)';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;

class ShmError extends Error {}

function checkSegmentName(segment) {
  if (typeof segment !== 'string' || segment === '' || segment === '.' || segment.includes('/')
    || segment.includes('..') || segment.includes('\0')) {
    throw new ShmError(`invalid segment name ${JSON.stringify(segment)}`);
  }
}

// Decide on the host's offer: { shm: SharedMemory | null, message: why ('' if not offered) }.
function negotiate(capabilities) {
  const caps = capabilities || {};
  if (caps[CAPABILITY] !== '1') return { shm: null, message: '' };
  const dir = caps[DIR_CAPABILITY] || '';
  if (!dir) return { shm: null, message: `shared memory declined: the host offered no ${DIR_CAPABILITY}` };
  if (!path.isAbsolute(dir)) return { shm: null, message: `shared memory declined: ${DIR_CAPABILITY} '${dir}' is not absolute` };
  let stat;
  try { stat = fs.statSync(dir); } catch { stat = null; }
  if (stat === null || !stat.isDirectory()) {
    return { shm: null, message: `shared memory declined: directory '${dir}' does not exist` };
  }
  try {
    fs.accessSync(dir, fs.constants.R_OK | fs.constants.W_OK | fs.constants.X_OK);
  } catch {
    return { shm: null, message: `shared memory declined: directory '${dir}' is not accessible` };
  }
  const raw = caps[MIN_BYTES_CAPABILITY];
  let minBytes = /^[0-9]+$/.test(raw || '') ? Number(raw) : -1;
  let note = '';
  if (!(minBytes >= 0) || !Number.isSafeInteger(minBytes)) {
    minBytes = DEFAULT_MIN_BYTES;
    note = ` (${MIN_BYTES_CAPABILITY}=${JSON.stringify(raw === undefined ? null : raw)} is not a decimal number; using the default)`;
  }
  return {
    shm: new SharedMemory(dir, minBytes),
    message: `shared memory on: directory '${dir}', outputs of at least ${minBytes} bytes go through it${note}`,
  };
}

class SharedMemory {
  constructor(dir, minBytes) {
    this.dir = dir;
    this.minBytes = minBytes;
    this.slabs = new Map(); // segment -> { fd, size, ino }, in least-recently-used order
    this.counter = 0;
  }

  openSegment(segment) {
    const file = path.join(this.dir, segment);
    let fd;
    try {
      fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW);
    } catch (err) {
      if (err.code === 'ENOENT') throw new ShmError(`segment '${segment}' not found in '${this.dir}'`);
      throw new ShmError(`cannot open segment '${segment}' in '${this.dir}': ${err.code || err.message}`);
    }
    try {
      const st = fs.fstatSync(fd);
      if (!st.isFile()) throw new ShmError(`segment '${segment}' in '${this.dir}' is not a regular file`);
      return { fd, size: st.size, ino: st.ino };
    } catch (err) {
      fs.closeSync(fd);
      if (err instanceof ShmError) throw err;
      throw new ShmError(`cannot stat segment '${segment}' in '${this.dir}': ${err.code || err.message}`);
    }
  }

  slab(segment) {
    let entry = this.slabs.get(segment);
    if (entry !== undefined) {
      this.slabs.delete(segment); // re-insert: most recently used last
      this.slabs.set(segment, entry);
      return entry;
    }
    this.pruneSlabs();
    entry = this.openSegment(segment);
    this.slabs.set(segment, entry);
    return entry;
  }

  // Before opening a new slab: close slabs whose file is gone, and the least recently used
  // ones beyond MAX_SLABS - 1.
  pruneSlabs() {
    for (const [name, entry] of this.slabs) {
      let gone;
      try { gone = fs.statSync(path.join(this.dir, name)).ino !== entry.ino; } catch { gone = true; }
      if (gone) {
        this.slabs.delete(name);
        closeQuietly(entry.fd);
      }
    }
    while (this.slabs.size >= MAX_SLABS) {
      const [name, entry] = this.slabs.entries().next().value;
      this.slabs.delete(name);
      closeQuietly(entry.fd);
    }
  }

  // The bytes of a SharedMemoryRef, copied into a new Buffer.
  read(ref) {
    const segment = ref.segment;
    checkSegmentName(segment);
    const offset = Number(ref.offset);
    const length = Number(ref.length);
    const isSlab = segment.startsWith(SLAB_PREFIX);
    const entry = isSlab ? this.slab(segment) : this.openSegment(segment);
    try {
      if (isSlab && offset >= 0 && length >= 0 && offset + length > entry.size) {
        entry.size = fs.fstatSync(entry.fd).size; // the host may have grown the slab since
      }
      if (!(offset >= 0) || !(length >= 0) || offset + length > entry.size) {
        throw new ShmError(`range [${offset}, ${offset + length}) is outside segment '${segment}' (${entry.size} bytes)`);
      }
      const buffer = Buffer.allocUnsafe(length);
      let done = 0;
      while (done < length) {
        const n = fs.readSync(entry.fd, buffer, done, length - done, offset + done);
        if (n === 0) throw new ShmError(`segment '${segment}' ended at ${offset + done} bytes, before the referenced range`);
        done += n;
      }
      return buffer;
    } catch (err) {
      if (err instanceof ShmError) throw err;
      throw new ShmError(`cannot read segment '${segment}' in '${this.dir}': ${err.code || err.message}`);
    } finally {
      if (!isSlab) fs.closeSync(entry.fd);
    }
  }

  // Writes a Buffer to a new file; returns its name, or throws (the caller sends inline).
  write(buffer) {
    for (let attempt = 0; attempt < 100; attempt++) {
      this.counter += 1;
      const name = names.workerOutputFile(process.pid, this.counter);
      const file = path.join(this.dir, name);
      let fd;
      try {
        fd = fs.openSync(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
      } catch (err) {
        if (err.code === 'EEXIST') continue; // left over by an earlier process with this pid
        throw err;
      }
      try {
        fs.fchmodSync(fd, 0o600); // exactly 0600 whatever the umask
        let done = 0;
        while (done < buffer.length) done += fs.writeSync(fd, buffer, done, buffer.length - done);
        fs.closeSync(fd);
        fd = -1;
      } catch (err) {
        if (fd !== -1) closeQuietly(fd);
        try { fs.unlinkSync(file); } catch { /* already gone */ }
        throw new Error(`${err.code || err.message} writing '${file}'`);
      }
      return name;
    }
    throw new Error(`no free output file name in '${this.dir}'`);
  }

  // Deletes output files that will not be handed to the host after all.
  discard(names) {
    for (const name of names) {
      try { fs.unlinkSync(path.join(this.dir, name)); } catch { /* gone */ }
    }
  }

  close() {
    for (const entry of this.slabs.values()) closeQuietly(entry.fd);
    this.slabs.clear();
  }
}

function closeQuietly(fd) {
  try { fs.closeSync(fd); } catch { /* already closed */ }
}

module.exports = {
  negotiate, SharedMemory, ShmError, checkSegmentName, NOT_ENABLED, CAPABILITY, MAX_SLABS, DEFAULT_MIN_BYTES,
};
