// A queue: Enqueue puts a message on tally-items, Tally (queue-triggered) writes it to tallies/{item}.json.
const { app, output } = require('@azure/functions');

const queueOut = output.storageQueue({ queueName: 'tally-items', connection: 'AzureWebJobsStorage' });
app.http('Enqueue', {
  methods: ['POST'],
  route: 'enqueue/{item}',
  authLevel: 'anonymous',
  extraOutputs: [queueOut],
  handler: async (request, context) => {
    context.extraOutputs.set(queueOut, JSON.stringify({ item: request.params.item, note: await request.text() }));
    return { status: 202, body: 'queued' };
  },
});

const tallyOut = output.storageBlob({ path: 'tallies/{item}.json', connection: 'AzureWebJobsStorage' });
app.storageQueue('Tally', {
  queueName: 'tally-items',
  connection: 'AzureWebJobsStorage',
  extraOutputs: [tallyOut],
  handler: async (message, context) => {
    context.log(`Tallying ${message.item} (dequeued ${context.triggerMetadata.dequeueCount} time(s))`);
    context.extraOutputs.set(tallyOut, JSON.stringify({ item: message.item, note: message.note, message: context.triggerMetadata.id }));
  },
});
