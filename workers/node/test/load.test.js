'use strict';
// WorkerLoad: the worker's event-loop busy and idle totals, reported every interval the host
// asked for at init (capability event_loop_utilization), for the host's compute vote.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { startHost, typed, withTimeout } = require('../test-support/fake-host');

const APP = {
  // Holds the loop for 400 ms, as a CPU-bound function does.
  'spin/index.js': `module.exports = async function (context) {
    const end = Date.now() + 400;
    while (Date.now() < end) { /* busy */ }
    return 'spun';
  };`,
  // Awaits for 400 ms, as a function waiting on storage does: the loop is free meanwhile.
  'wait/index.js': `module.exports = async function (context) {
    await new Promise((r) => setTimeout(r, 400));
    return 'waited';
  };`,
};
const BINDINGS = { t: { type: 'queueTrigger', direction: 'IN' }, $return: { type: 'queue', direction: 'OUT' } };

const reports = (host) => host.received.filter((m) => m.content === 'worker_load').map((m) => m.worker_load);

// The next report after now, so that a difference spans what happened in between.
async function nextReport(host) {
  const seen = reports(host).length;
  const deadline = Date.now() + 5000;
  while (reports(host).length === seen) {
    if (Date.now() > deadline) throw new Error(`no WorkerLoad within 5 s (${seen} so far)`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return reports(host)[reports(host).length - 1];
}

async function started(t) {
  const host = await startHost({ files: APP });
  t.after(() => host.stop());
  const init = (await host.init({ event_loop_utilization: '50' })).worker_init_response;
  for (const name of ['spin', 'wait'])
    assert.equal((await host.load(name, { name, script_file: `${name}/index.js`, bindings: BINDINGS })).result.status, 'SUCCESS');
  return { host, init };
}

const invoke = (host, name) => host.invoke(name, { input_data: [{ name: 't', data: typed.string('x') }] });

test('offered an interval, the worker accepts event_loop_utilization and reports growing totals', async (t) => {
  const { host, init } = await started(t);
  assert.equal(init.capabilities.event_loop_utilization, '1');

  const first = await nextReport(host);
  const later = await nextReport(host);
  assert.ok(later.event_loop_active_ms >= first.event_loop_active_ms, 'active time never falls');
  assert.ok(later.event_loop_idle_ms >= first.event_loop_idle_ms, 'idle time never falls');
  assert.ok(later.event_loop_active_ms + later.event_loop_idle_ms > first.event_loop_active_ms + first.event_loop_idle_ms, 'time passed between reports');
});

test('a function that holds the loop shows as busy time; one that awaits does not', async (t) => {
  const { host } = await started(t);

  const beforeSpin = await nextReport(host);
  assert.equal((await invoke(host, 'spin')).return_value.string, 'spun');
  const afterSpin = await nextReport(host);
  const spinBusy = afterSpin.event_loop_active_ms - beforeSpin.event_loop_active_ms;
  // The 400 ms loop ran inside one callback: all of it is active time, however loaded the machine.
  assert.ok(spinBusy >= 380, `busy ${spinBusy} ms across a 400 ms spin`);

  const beforeWait = await nextReport(host);
  const waits = await Promise.all([1, 2, 3, 4].map(() => invoke(host, 'wait')));
  assert.deepEqual(waits.map((r) => r.return_value.string), ['waited', 'waited', 'waited', 'waited']);
  const afterWait = await nextReport(host);
  const waitBusy = afterWait.event_loop_active_ms - beforeWait.event_loop_active_ms;
  const waitIdle = afterWait.event_loop_idle_ms - beforeWait.event_loop_idle_ms;
  // Four invocations in flight for 400 ms, and the loop was mostly waiting in the poll.
  assert.ok(waitIdle > waitBusy, `busy ${waitBusy} ms, idle ${waitIdle} ms across four 400 ms waits`);
});

test('not offered, the worker neither accepts nor reports; an offer that is no interval is refused with a warning', async (t) => {
  const host = await startHost({ files: APP });
  t.after(() => host.stop());
  const init = (await host.init({})).worker_init_response;
  assert.equal(init.capabilities.event_loop_utilization, undefined);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(reports(host).length, 0);

  const again = await startHost({ files: APP });
  t.after(() => again.stop());
  const refused = (await again.init({ event_loop_utilization: 'often' })).worker_init_response;
  assert.equal(refused.capabilities.event_loop_utilization, undefined);
  await withTimeout((async () => {
    while (!again.logs.some((l) => l.level === 'WARNING' && /event_loop_utilization: 'often' is no interval/.test(l.message)))
      await new Promise((r) => setTimeout(r, 10));
  })(), 5000, 'the warning naming the capability and its value');
  assert.equal(reports(again).length, 0);
});

test('invocations waiting back to back, which keep the report timer from firing, still bring reports as they end', async (t) => {
  const { host } = await started(t);
  await nextReport(host);
  const from = host.received.length;

  // Six 400 ms spins sent at once: 2.4 s of loop held by invocations that follow each other.
  const spins = await Promise.all([1, 2, 3, 4, 5, 6].map(() => invoke(host, 'spin')));
  assert.deepEqual(spins.map((r) => r.return_value.string), Array(6).fill('spun'));

  const kinds = host.received.slice(from).map((m) => m.content).filter((c) => c === 'invocation_response' || c === 'worker_load');
  const between = kinds.slice(kinds.indexOf('invocation_response'), kinds.lastIndexOf('invocation_response'));
  // One report after each response but the last, at least: each spin outlasts the 50 ms interval.
  assert.ok(between.filter((c) => c === 'worker_load').length >= 5, `between the six responses: ${between.join(', ')}`);
});
