'use strict';
// timerTrigger inputs: Azure's payload becomes Node v3's camelCase timer object.
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { toTimerObject } = require('../lib/converters');
const { planBindings } = require('../lib/loader');

test('the timer payload gets camelCase keys at every level', () => {
  const payload = {
    Schedule: { AdjustForDST: true },
    ScheduleStatus: { Last: '2026-11-28T17:00:00+00:00', Next: '2026-11-28T17:05:00+00:00', LastUpdated: '2026-11-28T17:00:00+00:00' },
    IsPastDue: true,
  };
  const expected = {
    schedule: { adjustForDST: true },
    scheduleStatus: { last: '2026-11-28T17:00:00+00:00', next: '2026-11-28T17:05:00+00:00', lastUpdated: '2026-11-28T17:00:00+00:00' },
    isPastDue: true,
  };
  assert.deepEqual(toTimerObject(payload), expected);
  assert.deepEqual(toTimerObject(JSON.stringify(payload)), expected);
  assert.deepEqual(toTimerObject(Buffer.from(JSON.stringify(payload))), expected);
  assert.deepEqual(toTimerObject({ Schedule: { AdjustForDST: true }, ScheduleStatus: null, IsPastDue: false }),
    { schedule: { adjustForDST: true }, scheduleStatus: null, isPastDue: false });
});

test('a payload that is not an object is refused', () => {
  assert.throws(() => toTimerObject('[1,2]'), /a timer payload is a JSON object, not an array/);
  assert.throws(() => toTimerObject('3'), /not number/);
});

test('only a timerTrigger input is marked as a timer', () => {
  const plan = planBindings({
    myTimer: { type: 'timerTrigger', direction: 'IN' },
    other: { type: 'blob', direction: 'IN' },
  });
  assert.equal(plan.inputs.get('myTimer').isTimer, true);
  assert.equal(plan.inputs.get('other').isTimer, false);
  assert.equal(plan.triggerName, 'myTimer');
});
