#!/usr/bin/env node
/**
 * The `svc-gateway` binary: serve, and the operator's commands. The only
 * place that reads `process.env`; everything below it gets values passed in.
 */
import { parseArgs } from 'node:util';
import { ConfigError } from './config.js';
import { DatabaseUrlError } from './store/open.js';
import { AutoModelError } from './gateway/auto/model.js';
import { commands, CliError, USAGE } from './cli/commands.js';

async function main(argv: string[]): Promise<number> {
  const [group, action, ...rest] = argv;
  if (!group || group === '--help' || group === '-h' || group === 'help') {
    process.stdout.write(USAGE);
    return group ? 0 : 2;
  }
  // One-word commands (serve, migrate) take every argument after the word.
  const single = commands[group] !== undefined;
  const name = single ? group : `${group} ${action ?? ''}`.trim();
  const command = commands[name];
  if (!command) {
    process.stderr.write(`svc-gateway: unknown command '${name}'\n\n${USAGE}`);
    return 2;
  }
  const args = single ? [action, ...rest].filter((a): a is string => a !== undefined) : rest;
  const { values } = parseArgs({ args, options: command.options, strict: true, allowPositionals: false });
  return command.run(values, { env: process.env, out: process.stdout, err: process.stderr });
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (err: unknown) => {
    const known = err instanceof CliError || err instanceof ConfigError || err instanceof DatabaseUrlError || err instanceof AutoModelError
      || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    process.stderr.write(`svc-gateway: ${known ? (err as Error).message : (err as Error).stack ?? String(err)}\n`);
    process.exitCode = known ? 2 : 1;
  },
);
