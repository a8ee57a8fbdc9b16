// The two-stage pipeline of samples/node-app: Ingest stores the posted text as pipeline-raw/{name}, whose blob trigger
// runs Normalize, which writes pipeline-clean/{name}.
const { app, output } = require('@azure/functions');

const raw = output.storageBlob({ path: 'pipeline-raw/{name}', connection: 'AzureWebJobsStorage' });
app.http('Ingest', {
  methods: ['POST'],
  route: 'ingest/{name}',
  authLevel: 'anonymous',
  extraOutputs: [raw],
  handler: async (request, context) => {
    const body = Buffer.from(await request.arrayBuffer());
    context.extraOutputs.set(raw, body);
    return { status: 202, body: `stored ${body.length} bytes as pipeline-raw/${request.params.name}` };
  },
});

const clean = output.storageBlob({ path: 'pipeline-clean/{name}', connection: 'AzureWebJobsStorage' });
app.storageBlob('Normalize', {
  path: 'pipeline-raw/{name}',
  connection: 'AzureWebJobsStorage',
  extraOutputs: [clean],
  handler: async (blob, context) => {
    context.log(`Normalizing ${context.triggerMetadata.name} (${blob.length} bytes)`);
    context.extraOutputs.set(clean, blob.toString('utf8').toLowerCase().split(/\s+/).filter(Boolean).join(' '));
  },
});
