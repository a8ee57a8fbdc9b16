// Stage 2 of the pipeline: lower-cases the text and folds its white space.
module.exports = async function (context, raw) {
  context.log(`Normalizing ${context.bindingData.blobTrigger} (${raw.length} chars)`);
  context.bindings.clean = raw.toLowerCase().split(/\s+/).filter(Boolean).join(' ');
};
