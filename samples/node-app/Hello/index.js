module.exports = async function (context, req) {
  const name = req.query.name || (req.body && req.body.name);
  if (!name) {
    context.res = { status: 400, body: 'Pass a name in the query string or in a JSON body.' };
    return;
  }
  context.log(`Saying hello to ${name}`);
  context.res = { body: `Hello, ${name}!` };
};
