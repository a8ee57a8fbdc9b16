// Counts the words of documents/{name}, stores the counts in wordcounts/{name}.json and returns them (blob input and
// output through the cache).
const { app, input, output } = require('@azure/functions');

const documentIn = input.storageBlob({ path: 'documents/{name}', connection: 'AzureWebJobsStorage' });
const countsOut = output.storageBlob({ path: 'wordcounts/{name}.json', connection: 'AzureWebJobsStorage' });
app.http('WordCount', {
  methods: ['GET'],
  route: 'wordcount/{name}',
  authLevel: 'anonymous',
  extraInputs: [documentIn],
  extraOutputs: [countsOut],
  handler: async (request, context) => {
    const document = context.extraInputs.get(documentIn);
    if (document === null || document === undefined) return { status: 404, body: `documents/${request.params.name} does not exist` };
    const counts = new Map();
    for (const word of document.toString('utf8').toLowerCase().split(/\s+/).filter(Boolean)) counts.set(word, (counts.get(word) || 0) + 1);
    const top = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 5);
    const words = [...counts.values()].reduce((a, b) => a + b, 0);
    const body = { blob: `documents/${request.params.name}`, words, top };
    context.extraOutputs.set(countsOut, JSON.stringify(body));
    return { jsonBody: body };
  },
});
