// Counts the words of documents/{name}, stores the counts in wordcounts/{name}.json and returns them.
module.exports = async function (context, req) {
  const document = context.bindings.document;
  if (document === null || document === undefined) {
    context.res = { status: 404, body: `documents/${req.params.name} does not exist` };
    return;
  }
  const counts = new Map();
  for (const word of document.toString('utf8').toLowerCase().split(/\s+/).filter(Boolean)) {
    counts.set(word, (counts.get(word) || 0) + 1);
  }
  const top = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 5);
  const words = [...counts.values()].reduce((a, b) => a + b, 0);
  const body = { blob: `documents/${req.params.name}`, words, top };
  context.bindings.counts = JSON.stringify(body);
  context.res = { headers: { 'content-type': 'application/json' }, body };
};
