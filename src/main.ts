#!/usr/bin/env node
/**
 * The `svc-gateway` binary: serve, and the operator's commands. The only
 * place that reads `process.env`; everything below it gets values passed in.
 */
import { runCli } from './cli/program.js';

runCli(process.argv.slice(2), { env: process.env, out: process.stdout, err: process.stderr }).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`svc-gateway: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
