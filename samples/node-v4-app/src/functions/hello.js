// The HTTP greeting of samples/node-app, in the v4 model: registered with app.http, no function.json.
const { app } = require('@azure/functions');

app.http('Hello', {
  methods: ['GET', 'POST'],
  authLevel: 'anonymous',
  handler: async (request, context) => {
    let name = request.query.get('name');
    if (!name && request.method === 'POST') {
      try {
        name = ((await request.json()) || {}).name;
      } catch {
        name = undefined;
      }
    }
    if (!name) return { status: 400, body: 'Pass a name in the query string or in a JSON body.' };
    context.log(`Saying hello to ${name}`);
    return { body: `Hello, ${name}!` };
  },
});
