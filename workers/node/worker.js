#!/usr/bin/env node
'use strict';
// FaaST Node.js language worker (Azure Functions v3 programming model).
// Launched by the host as:
//   node worker.js --host 127.0.0.1 --port <P> --worker-id <ID>
//                  [--max-message-length <bytes>] [--connect-timeout-ms <ms>]
// with cwd = the function app's directory and the app settings in the environment.
const { WorkerChannel } = require('./lib/channel');

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (!arg.startsWith('--')) continue;
    const eq = arg.indexOf('=');
    if (eq !== -1) {
      args[arg.slice(2, eq)] = arg.slice(eq + 1);
    } else if (i + 1 < argv.length && !argv[i + 1].startsWith('--')) {
      args[arg.slice(2)] = argv[++i];
    } else {
      args[arg.slice(2)] = 'true';
    }
  }
  return args;
}

function usage(message) {
  process.stderr.write(`faast node worker: ${message}\n` +
    'usage: node worker.js --host <host> --port <port> --worker-id <id> [--max-message-length <bytes>] [--connect-timeout-ms <ms>]\n');
  process.exit(2);
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const port = Number(args.port);
  if (!Number.isInteger(port) || port <= 0 || port > 65535) usage(`invalid or missing --port '${args.port}'`);
  const maxMessageLength = args['max-message-length'] !== undefined ? Number(args['max-message-length']) : undefined;
  if (maxMessageLength !== undefined && !(maxMessageLength > 0)) usage(`invalid --max-message-length '${args['max-message-length']}'`);

  const connectTimeoutMs = args['connect-timeout-ms'] !== undefined ? Number(args['connect-timeout-ms']) : undefined;
  if (connectTimeoutMs !== undefined && !(connectTimeoutMs > 0)) usage(`invalid --connect-timeout-ms '${args['connect-timeout-ms']}'`);

  const channel = new WorkerChannel({
    host: args.host || '127.0.0.1',
    port,
    workerId: args['worker-id'] || `node-${process.pid}`,
    maxMessageLength,
    connectTimeoutMs,
  });

  // Never linger as an orphan: if the host process goes away we are re-parented.
  const parentPid = process.ppid;
  setInterval(() => {
    if (process.ppid !== parentPid) channel.fatal(`parent process ${parentPid} is gone`);
  }, 500).unref();

  // A stray rejection in user code must not take down other invocations.
  process.on('unhandledRejection', (reason) => {
    const detail = reason instanceof Error ? reason.stack : String(reason);
    channel.workerLog('ERROR', `unhandled promise rejection: ${detail}`);
  });
  // After an uncaught exception the process state is unknown: report it and exit so the
  // host can restart the worker.
  process.on('uncaughtException', (err) => {
    const detail = err instanceof Error ? err.stack : String(err);
    channel.workerLog('CRITICAL', `uncaught exception: ${detail}`);
    process.stderr.write(`faast node worker: uncaught exception: ${detail}\n`);
    process.exitCode = 1;
    setTimeout(() => process.exit(1), 100).unref();
  });

  channel.start();
}

main();
