/**
 * The command line, parsed by commander from the command specs: help for the
 * program and each command, and one mapping from every way a run can end to
 * its exit code (0 done, 1 not found / ledger mismatch / failure, 2 bad usage).
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { ConfigError } from '../config.js';
import { AutoModelError } from '../gateway/auto/model.js';
import { DatabaseUrlError, DEFAULT_DATABASE_URL } from '../store/open.js';
import { changeCommands } from './commands.js';
import { inspectCommands } from './inspect.js';
import { CliError, EXIT, NotFoundError, type CommandSpec, type Io } from './support.js';

const ORDER = [
  'serve', 'accounts create', 'accounts list', 'accounts show', 'credits grant', 'credits show',
  'keys create', 'keys list', 'keys revoke', 'usage', 'ledger verify', 'migrate',
];

/** Every command, in the order help lists them. */
export const COMMANDS: CommandSpec[] = [...changeCommands, ...inspectCommands]
  .sort((a, b) => ORDER.indexOf(a.name) - ORDER.indexOf(b.name));

const GROUPS: Record<string, string> = {
  accounts: 'create, list and show accounts',
  credits: 'grant and show credits',
  keys: 'create, list and revoke API keys',
  ledger: 'check the ledger',
};

const EXIT_CODES = `Exit codes: 0 done; 1 not found (account, key), ledger disagreement, or a failure
(database unreachable); 2 bad usage (unknown command or option, missing or malformed value).`;

/** Runs one command line to its end; never calls process.exit. */
export async function runCli(argv: string[], io: Io): Promise<number> {
  let code: number = EXIT.ok;
  const program = buildProgram(io, (c) => { code = c; });
  try {
    await program.parseAsync(argv, { from: 'user' });
    return code;
  } catch (err) {
    return failure(err, io);
  }
}

export function buildProgram(io: Io, exitWith: (code: number) => void): Command {
  const program = new Command('svc-gateway')
    .description('Credit-metered LLM API gateway: serve it, and operate its accounts, keys, credits and ledger.')
    .exitOverride()
    .configureOutput(output(io, 'svc-gateway'))
    .addHelpText('after', `\nEvery command:\n${synopsis()}\n` +
      `Every command takes --database URL (else DATABASE_URL, else ${DEFAULT_DATABASE_URL})\n` +
      `and --json for the API's JSON instead of a table.\n\n${EXIT_CODES}\n`);
  const groups = new Map<string, Command>();
  for (const spec of COMMANDS) {
    const [first, action] = spec.name.split(' ') as [string, string | undefined];
    let parent = program;
    if (action !== undefined) {
      parent = groups.get(first) ?? program.command(first).description(GROUPS[first] ?? first)
        .configureOutput(output(io, `svc-gateway ${first}`));
      groups.set(first, parent);
    }
    const command = parent.command(action ?? first).description(spec.summary)
      .configureOutput(output(io, `svc-gateway ${spec.name}`));
    for (const [flags, help, required] of spec.options) {
      command.addOption(new Option(flags, required ? `${help} (required)` : help).argParser(notAnOption));
    }
    command
      .addOption(new Option('--database <url>', `database URL (else DATABASE_URL, else ${DEFAULT_DATABASE_URL})`).argParser(notAnOption))
      .option('--json', "print the API's JSON object instead of text")
      .addHelpText('after', `\n${EXIT_CODES}\n`)
      .action(async (options: Record<string, unknown>) => exitWith(await spec.run(options, io)));
  }
  return program;
}

/** `--account --json`: the value forgotten, the next option taken for it. Refused rather than looked up. */
function notAnOption(value: string): string {
  if (value.startsWith('--')) throw new InvalidArgumentError('It needs a value, not another option.');
  return value;
}

/** One line per command with its options, required ones bare and the rest in brackets. */
export function synopsis(): string {
  return COMMANDS.map((spec) => {
    const options = spec.options.map(([flags, , required]) => (required ? flags : `[${flags}]`));
    return `  svc-gateway ${[spec.name, ...options].join(' ')}\n`;
  }).join('');
}

/** Commander's errors as one line: "svc-gateway: unknown option '--bogus' (see svc-gateway accounts create --help)". */
function output(io: Io, path: string) {
  return {
    writeOut: (text: string) => { io.out.write(text); },
    writeErr: (text: string) => { io.err.write(text); },
    outputError: (text: string, write: (text: string) => void) => {
      write(`svc-gateway: ${text.replace(/^error: /, '').replace(/\s*\n\s*/g, ' ').trim()} (see ${path} --help)\n`);
    },
  };
}

function failure(err: unknown, io: Io): number {
  if (err instanceof CommanderError) {
    // Help asked for: its own code (0). Help shown for a command line without a command, or an error already written: usage.
    return err.code === 'commander.helpDisplayed' || err.code === 'commander.version' ? err.exitCode : EXIT.usage;
  }
  if (err instanceof NotFoundError) {
    io.err.write(`svc-gateway: ${err.message}\n`);
    return EXIT.failed;
  }
  if (err instanceof CliError || err instanceof ConfigError || err instanceof DatabaseUrlError || err instanceof AutoModelError) {
    io.err.write(`svc-gateway: ${err.message}\n`);
    return EXIT.usage;
  }
  io.err.write(`svc-gateway: ${(err as Error).stack ?? String(err)}\n`);
  return EXIT.failed;
}
