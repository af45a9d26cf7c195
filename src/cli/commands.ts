/** The operator's commands; each prints text, or JSON with `--json`. */
import { isWorker, superviseWorkers, workerCount } from './workers.js';
import type { ParseArgsConfig } from 'node:util';
import { buildApp } from '../app.js';
import { isoSeconds } from '../clock.js';
import { loadConfig } from '../config.js';
import { apiKeyObject, issueApiKey } from '../keys/issue.js';
import { grantObject, grantProblem } from '../metering/credits.js';
import { DEFAULT_DATABASE_URL, migrateDatabase, openStore } from '../store/open.js';
import type { Store } from '../store/types.js';

export class CliError extends Error {
  override name = 'CliError';
}

type Values = Record<string, string | boolean | Array<string | boolean> | undefined>;

export interface Io {
  env: Readonly<Record<string, string | undefined>>;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
}

export interface Command {
  options: NonNullable<ParseArgsConfig['options']>;
  run(values: Values, io: Io): Promise<number>;
}

export const USAGE = `Usage: svc-gateway <command> [options]

  serve [--config FILE] [--port N] [--host H] [--database URL] [--workers N|auto]
  accounts create [--name N]
  credits grant --account ID --kind purchased|earned --amount N [--expires-at ISO]
  keys create --account ID [--environment live|test] [--daily-limit N] [--rate-limit RPM] [--name N]
  ledger verify
  migrate

Every command takes --database URL (else DATABASE_URL, else ${DEFAULT_DATABASE_URL})
and --json for machine-readable output.
`;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

const common = {
  database: { type: 'string' },
  json: { type: 'boolean' },
} as const;

export const commands: Record<string, Command> = {
  serve: {
    options: { ...common, config: { type: 'string' }, port: { type: 'string' }, host: { type: 'string' }, workers: { type: 'string' } },
    run: serve,
  },
  'accounts create': {
    options: { ...common, name: { type: 'string' } },
    run: (v, io) => withStore(v, io, async (store) => {
      const account = await store.createAccount(str(v.name) ?? null);
      const { record, secret } = await issueApiKey(store, account.id, { name: 'default' });
      return print(v, io, { account: { id: account.id, name: account.name, created_at: isoSeconds(account.createdAt) }, api_key: { ...apiKeyObject(record), key: secret } },
        `account  ${account.id}\napi key  ${secret}\n\nThe key is shown only now. Grant credits with:\n` +
        `  npx svc-gateway credits grant --account ${account.id} --kind purchased --amount 100000\n`);
    }),
  },
  'credits grant': {
    options: { ...common, account: { type: 'string' }, kind: { type: 'string' }, amount: { type: 'string' }, 'expires-at': { type: 'string' } },
    run: (v, io) => withStore(v, io, async (store) => {
      const accountId = required(v, 'account');
      const kind = required(v, 'kind');
      if (kind !== 'earned' && kind !== 'purchased') throw new CliError('--kind must be earned or purchased');
      const expiresAt = str(v['expires-at']) ? parseInstant(str(v['expires-at'])!) : null;
      const input = { kind, amount: integer(required(v, 'amount'), '--amount'), expiresAt } as const;
      const problem = grantProblem(input);
      if (problem) throw new CliError(`--${problem.param.replace('_', '-')}: ${problem.message}`);
      if (!(await store.getAccount(accountId))) throw new CliError(`no account ${accountId}`);
      const grant = await store.grant(accountId, input.kind, input.amount, input.expiresAt);
      return print(v, io, grantObject(grant), `granted ${grant.amount} ${grant.kind} credits to ${accountId} (${grant.id})\n`);
    }),
  },
  'keys create': {
    options: {
      ...common, account: { type: 'string' }, environment: { type: 'string' }, 'daily-limit': { type: 'string' },
      'rate-limit': { type: 'string' }, name: { type: 'string' },
    },
    run: (v, io) => withStore(v, io, async (store) => {
      const accountId = required(v, 'account');
      const environment = str(v.environment) ?? 'live';
      if (environment !== 'live' && environment !== 'test') throw new CliError('--environment must be live or test');
      if (!(await store.getAccount(accountId))) throw new CliError(`no account ${accountId}`);
      const limit = str(v['daily-limit']);
      const rpm = str(v['rate-limit']);
      const { record, secret } = await issueApiKey(store, accountId, {
        environment, name: str(v.name) ?? null, daily_credit_limit: limit === undefined ? null : integer(limit, '--daily-limit'),
        rate_limit_rpm: rpm === undefined ? null : positive(integer(rpm, '--rate-limit'), '--rate-limit'),
      });
      return print(v, io, { ...apiKeyObject(record), key: secret }, `api key  ${secret}\nid       ${record.id}\n\nThe key is shown only now.\n`);
    }),
  },
  'ledger verify': {
    options: { ...common },
    run: (v, io) => withStore(v, io, async (store) => {
      const report = await store.verifyLedger();
      const ok = report.disagreements.length === 0;
      const lines = report.disagreements.map((d) => `  ${d.accountId} ${d.subject} ${d.field}: stored ${d.stored}, ledger says ${d.recomputed}\n`);
      print(v, io, { ok, ...report },
        `${ok ? 'ok' : 'MISMATCH'}: ${report.accounts} accounts, ${report.grants} grants, ${report.entries} ledger entries\n${lines.join('')}`);
      return ok ? 0 : 1;
    }),
  },
  migrate: {
    options: { ...common },
    run: async (v, io) => {
      const url = str(v.database) ?? io.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
      const { kind, version } = await migrateDatabase(url);
      return print(v, io, { database: kind, schema_version: version }, `${kind} database at schema version ${version}\n`);
    },
  },
};

async function serve(v: Values, io: Io): Promise<number> {
  const config = loadConfig(str(v.config) ?? io.env.SVC_CONFIG);
  const level = io.env.LOG_LEVEL ?? 'info';
  if (!LOG_LEVELS.includes(level)) throw new CliError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${level}'`);
  const port = integer(str(v.port) ?? io.env.PORT ?? '8080', '--port');
  if (port > 65_535) throw new CliError(`--port must be at most 65535, got ${port}`);
  const databaseUrl = str(v.database) ?? io.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
  const workers = workerCountOf(str(v.workers));
  const host = str(v.host) ?? io.env.HOST ?? '0.0.0.0';
  if (workers > 1 && !isWorker()) {
    // The primary checks the config and migrates once, then only supervises.
    await (await openStore(databaseUrl)).close();
    io.err.write(`svc-gateway: ${workers} workers serving http://${host.replace('0.0.0.0', '127.0.0.1')}:${port} — database ${databaseUrl}\n`);
    return superviseWorkers(workers, (line) => io.err.write(`${line}\n`));
  }
  const store = await openStore(databaseUrl);
  const app = await buildApp({
    config, store, env: io.env, adminToken: io.env.SVC_ADMIN_TOKEN ?? null,
    logger: { level }, defaultMetrics: true,
  });
  const address = await app.listen({ port, host });
  if (isWorker()) return untilSignal(app, store);
  const providers = config.providers.map((p) => `${p.id} (${p.type})`).join(', ');
  io.err.write(`svc-gateway serving ${address.replace('0.0.0.0', '127.0.0.1')} — database ${databaseUrl}; ` +
    `models ${config.models.map((m) => m.id).join(', ')}; providers ${providers}\n` +
    'No key yet? In another terminal:\n' +
    '  npx svc-gateway accounts create --name me          # prints an account id and its first API key\n' +
    '  npx svc-gateway credits grant --account <acct_…> --kind purchased --amount 100000\n');
  return untilSignal(app, store);
}

/** Serves until SIGINT or SIGTERM, then closes gracefully: in-flight requests finish, then the store closes. */
function untilSignal(app: { close(): Promise<unknown> }, store: Store): Promise<number> {
  return new Promise((resolve) => {
    const stop = () => {
      // A worker's channel to its primary would keep it alive: let go of it once closed.
      app.close().then(() => store.close()).finally(() => { if (isWorker()) process.disconnect?.(); }).then(() => resolve(0), () => resolve(1));
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

function workerCountOf(value: string | undefined): number {
  try {
    return workerCount(value);
  } catch (err) {
    throw new CliError((err as Error).message);
  }
}

async function withStore(v: Values, io: Io, run: (store: Store) => Promise<number>): Promise<number> {
  const store = await openStore(str(v.database) ?? io.env.DATABASE_URL ?? DEFAULT_DATABASE_URL);
  try {
    return await run(store);
  } finally {
    await store.close();
  }
}

function print(v: Values, io: Io, json: unknown, text: string): number {
  io.out.write(v.json ? `${JSON.stringify(json, null, 2)}\n` : text);
  return 0;
}

function str(value: Values[string]): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function required(v: Values, name: string): string {
  const value = str(v[name]);
  if (value === undefined || value === '') throw new CliError(`--${name} is required`);
  return value;
}

function positive(value: number, flag: string): number {
  if (value < 1) throw new CliError(`${flag} must be at least 1 (requests per minute)`);
  return value;
}

function integer(text: string, name: string): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) throw new CliError(`${name} must be a non-negative integer, got '${text}'`);
  return Number(text);
}

function parseInstant(text: string): Date {
  const date = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(date.getTime())) throw new CliError(`--expires-at must be an ISO 8601 time, got '${text}'`);
  return date;
}
