'use strict';
// Measures the worker's CPU cost per no-op HTTP invocation: runs the real worker.js against
// the in-test host (test-support/fake-host.js), keeps a window of invocations in flight,
// and reads the worker process's CPU time from /proc before and after.
//   node workers/node/bench/noop.js [invocations=20000] [window=64] [model=v3|v4] [returns=nothing|ok]
// v4 runs the same no-op as an @azure/functions 4.x app (test-support/v4-deps, `npm ci` there first).
// returns=ok makes both return { body: 'ok' }, as `./faast bench runtime`'s no-ops do (bench/apps/node-bench,
// bench/apps/node-v4-bench): in v4 that response goes through the library's HttpResponse (an undici Response).
const fs = require('fs');
const path = require('path');
const { startHost, typed, processCpuMs: cpuMs } = require('../test-support/fake-host');

const TOTAL = Number(process.argv[2] || 20000);
const WINDOW = Number(process.argv[3] || 64);
const MODEL = process.argv[4] || 'v3';
if (MODEL !== 'v3' && MODEL !== 'v4') throw new Error(`model '${MODEL}': v3 or v4`);
const RETURNS = process.argv[5] || 'nothing';
if (RETURNS !== 'nothing' && RETURNS !== 'ok') throw new Error(`returns '${RETURNS}': nothing or ok`);
const BODY = RETURNS === 'ok' ? "return { body: 'ok' };" : '';
const V4_DEPS = path.resolve(__dirname, '..', 'test-support', 'v4-deps', 'node_modules');
const headers = {
  host: 'localhost:7071', 'user-agent': 'bench/1.0', accept: '*/*', 'accept-encoding': 'gzip',
  connection: 'keep-alive', 'x-request-id': 'abc123', 'x-forwarded-for': '10.0.0.1', 'content-length': '0',
};
const request = {
  input_data: [{ name: 'req', data: typed.http({ method: 'GET', url: 'http://localhost:7071/api/noop?name=x', headers, query: { name: 'x' } }) }],
  trigger_metadata: { Query: typed.json({ name: 'x' }), Headers: typed.json(headers) },
};

async function run(host, count) {
  let sent = 0;
  let done = 0;
  await new Promise((resolve, reject) => {
    const pump = () => {
      while (sent < count && sent - done < WINDOW) {
        sent++;
        host.invoke('noop', request, 30000).then((r) => {
          if (r.result.status !== 'SUCCESS') return reject(new Error(JSON.stringify(r.result)));
          done++;
          if (done === count) resolve(); else pump();
          return undefined;
        }, reject);
      }
    };
    pump();
  });
}

(async () => {
  const files = MODEL === 'v3'
    ? { 'noop/index.js': `module.exports = async function (context, req) { ${BODY} };\n` }
    : {
      'package.json': JSON.stringify({ main: 'index.js' }),
      // The trigger named 'req' so both models get the same request.
      'index.js': `const { app, trigger, output } = require('@azure/functions');
app.generic('noop', { trigger: trigger.http({ name: 'req' }), return: output.http({}), handler: async () => { ${BODY} } });\n`,
    };
  const host = await startHost({
    files,
    // e.g. FAAST_BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" to profile the worker
    nodeArgs: (process.env.FAAST_BENCH_NODE_ARGS || '').split(' ').filter(Boolean),
  });
  try {
    if (MODEL === 'v4') {
      if (!fs.existsSync(V4_DEPS)) throw new Error(`${V4_DEPS} is missing: npm ci in ${path.dirname(V4_DEPS)}`);
      fs.symlinkSync(V4_DEPS, path.join(host.appDir, 'node_modules'));
    }
    await host.init();
    if (MODEL === 'v4') {
      const md = await host.metadata();
      if (md.result.status !== 'SUCCESS') throw new Error(md.result.result);
    }
    const load = await host.load('noop', {
      name: 'noop',
      script_file: 'noop/index.js',
      bindings: { req: { type: 'httpTrigger', direction: 'IN' }, $return: { type: 'http', direction: 'OUT' } },
    });
    if (load.result.status !== 'SUCCESS') throw new Error(load.result.exception.message);
    await run(host, Math.min(5000, TOTAL)); // warm up (JIT)
    const pid = host.child.pid;
    const cpu0 = cpuMs(pid);
    const t0 = process.hrtime.bigint();
    await run(host, TOTAL);
    const wallMs = Number(process.hrtime.bigint() - t0) / 1e6;
    const cpu = cpuMs(pid) - cpu0;
    const perInvUs = (cpu * 1000) / TOTAL;
    console.log(JSON.stringify({
      model: MODEL,
      returns: RETURNS,
      invocations: TOTAL,
      window: WINDOW,
      worker_cpu_ms: Math.round(cpu),
      worker_cpu_us_per_invocation: Number(perInvUs.toFixed(1)),
      worker_cpu_bound_invocations_per_sec: Math.round(1e6 / perInvUs),
      wall_ms: Math.round(wallMs),
      observed_invocations_per_sec: Math.round((TOTAL * 1000) / wallMs),
    }));
    host.terminate(1000);
    await host.waitExit(5000);
  } finally {
    await host.stop();
  }
})().catch((err) => { console.error(err); process.exit(1); });
