// What unchanged code does with an input blob: use the Buffer.
module.exports = async function (context, req) {
  return { body: String(context.bindings.inblob.length) };
};
