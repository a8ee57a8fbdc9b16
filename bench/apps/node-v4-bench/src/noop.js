// The Node no-op of bench/apps/node-bench (v3) in the v4 model, for noop_node_v4_p50_ms beside noop_node_p50_ms.
const { app } = require('@azure/functions');

app.http('Noop', { methods: ['GET'], authLevel: 'anonymous', handler: async () => ({ body: 'ok' }) });
