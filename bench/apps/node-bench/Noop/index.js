module.exports = async function (context, req) {
  return { body: 'ok' };
};
