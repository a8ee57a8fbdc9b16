'use strict';
// Loads the worker channel contract at runtime (no generated code, no build step).
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_PATH = path.resolve(__dirname, '..', '..', '..', 'protos', 'worker.proto');
const LOADER_OPTIONS = { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true };

let cached;

function loadProto() {
  if (!cached) {
    const definition = protoLoader.loadSync(PROTO_PATH, LOADER_OPTIONS);
    cached = grpc.loadPackageDefinition(definition).faast.worker.v1;
  }
  return cached;
}

module.exports = { loadProto, PROTO_PATH, LOADER_OPTIONS };
