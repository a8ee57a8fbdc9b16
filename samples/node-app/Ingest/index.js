// Stage 1 of the pipeline: stores the posted text as pipeline-raw/{name}, which triggers Normalize.
module.exports = async function (context, req) {
  const body = req.bufferBody || Buffer.from(req.rawBody || '', 'utf8');
  context.bindings.raw = body;
  return { status: 202, body: `stored ${body.length} bytes as pipeline-raw/${req.params.name}` };
};
