// A timer (the schedule is the app setting HEARTBEAT_SCHEDULE, NCRONTAB with seconds): records each run, once per
// occurrence however many instances run.
const { app, output } = require('@azure/functions');

const beat = output.storageBlob({ path: 'heartbeats/latest.json', connection: 'AzureWebJobsStorage' });
app.timer('Heartbeat', {
  schedule: '%HEARTBEAT_SCHEDULE%',
  useMonitor: true,
  extraOutputs: [beat],
  handler: async (timer, context) => {
    if (timer.isPastDue) context.warn('Heartbeat is past due');
    context.extraOutputs.set(beat, JSON.stringify({ past_due: timer.isPastDue, status: timer.scheduleStatus }));
  },
});
