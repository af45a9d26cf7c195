/**
 * The commands that change things (and `serve`): create accounts and keys,
 * grant credits, verify the ledger, migrate. Each prints text, or the API's
 * JSON with `--json`. The read-only commands are in inspect.ts.
 */
import { isWorker, superviseWorkers, workerCount } from './workers.js';
import { buildApp } from '../app.js';
import { loadConfig } from '../config.js';
import { apiKeyObject, issueApiKey } from '../keys/issue.js';
import { accountObject, grantObject, grantProblem } from '../metering/credits.js';
import { migrateDatabase, openStore } from '../store/open.js';
import type { Store } from '../store/types.js';
import { progressBar } from './progress.js';
import {
  CliError, databaseUrl, existingAccount, flag, integer, parseInstant, positive, print, required, str, withStore,
  type CommandSpec, type Io, type Values,
} from './support.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export const changeCommands: CommandSpec[] = [
  {
    name: 'serve',
    summary: 'serve the gateway (PORT, HOST, SVC_CONFIG, SVC_ADMIN_TOKEN, LOG_LEVEL from the environment)',
    options: [
      ['--config <file>', 'YAML or JSON config (else SVC_CONFIG, else the built-in simulator catalog)'],
      ['--port <n>', 'port to listen on (else PORT, else 8080)'],
      ['--host <host>', 'address to bind (else HOST, else 0.0.0.0)'],
      ['--workers <n>', 'processes serving one port: a number, or auto for one per core'],
    ],
    run: serve,
  },
  {
    name: 'accounts create',
    summary: 'create an account and its first API key',
    options: [['--name <name>', 'a name for the account']],
    run: (v, io) => withStore(v, io, async (store) => {
      const account = await store.createAccount(str(v.name) ?? null);
      const { record, secret } = await issueApiKey(store, account.id, { name: 'default' });
      return print(v, io, { account: accountObject(account), api_key: { ...apiKeyObject(record), key: secret } },
        `account  ${account.id}\napi key  ${secret}\n\nThe key is shown only now. Grant credits with:\n` +
        `  npx svc-gateway credits grant --account ${account.id} --kind purchased --amount 100000\n`);
    }),
  },
  {
    name: 'credits grant',
    summary: 'grant earned (expiring) or purchased credits to an account',
    options: [
      ['--account <id>', 'the account', true],
      ['--kind <kind>', 'earned or purchased', true],
      ['--amount <n>', 'credits, a positive integer', true],
      ['--expires-at <iso>', 'when earned credits expire (required for earned, refused for purchased)'],
    ],
    run: (v, io) => withStore(v, io, async (store) => {
      const accountId = required(v, 'account');
      const kind = required(v, 'kind');
      if (kind !== 'earned' && kind !== 'purchased') throw new CliError('--kind must be earned or purchased');
      const expiresAt = str(v.expiresAt) ? parseInstant(str(v.expiresAt)!) : null;
      const input = { kind, amount: integer(required(v, 'amount'), '--amount'), expiresAt } as const;
      const problem = grantProblem(input);
      if (problem) throw new CliError(`${flag(problem.param)}: ${problem.message}`);
      await existingAccount(store, accountId);
      const grant = await store.grant(accountId, input.kind, input.amount, input.expiresAt);
      return print(v, io, grantObject(grant), `granted ${grant.amount} ${grant.kind} credits to ${accountId} (${grant.id})\n`);
    }),
  },
  {
    name: 'keys create',
    summary: 'issue an API key for an account (the secret is shown once)',
    options: [
      ['--account <id>', 'the account', true],
      ['--environment <env>', 'live or test (default live)'],
      ['--daily-limit <n>', 'credits the key may spend per UTC day'],
      ['--rate-limit <rpm>', 'requests per minute the key may make'],
      ['--name <name>', 'a name for the key'],
    ],
    run: (v, io) => withStore(v, io, async (store) => {
      const accountId = required(v, 'account');
      const environment = str(v.environment) ?? 'live';
      if (environment !== 'live' && environment !== 'test') throw new CliError('--environment must be live or test');
      const limit = str(v.dailyLimit);
      const rpm = str(v.rateLimit);
      const daily = limit === undefined ? null : integer(limit, '--daily-limit');
      const perMinute = rpm === undefined ? null : positive(integer(rpm, '--rate-limit'), '--rate-limit');
      await existingAccount(store, accountId);
      const { record, secret } = await issueApiKey(store, accountId, {
        environment, name: str(v.name) ?? null, daily_credit_limit: daily, rate_limit_rpm: perMinute,
      });
      return print(v, io, { ...apiKeyObject(record), key: secret }, `api key  ${secret}\nid       ${record.id}\n\nThe key is shown only now.\n`);
    }),
  },
  {
    name: 'ledger verify',
    summary: 'recompute every balance and hold from the ledger; exit 1 where they disagree',
    options: [],
    run: (v, io) => withStore(v, io, async (store) => {
      const bar = progressBar('verifying ledger', io.err, { enabled: !v.json });
      const report = await store.verifyLedger(bar.update).finally(() => bar.finish());
      const ok = report.disagreements.length === 0;
      const lines = report.disagreements.map((d) => `  ${d.accountId} ${d.subject} ${d.field}: stored ${d.stored}, ledger says ${d.recomputed}\n`);
      print(v, io, { ok, ...report },
        `${ok ? 'ok' : 'MISMATCH'}: ${report.accounts} accounts, ${report.grants} grants, ${report.entries} ledger entries\n${lines.join('')}`);
      return ok ? 0 : 1;
    }),
  },
  {
    name: 'migrate',
    summary: 'apply the schema migrations the database lacks',
    options: [],
    run: async (v, io) => {
      const bar = progressBar('migrating', io.err, { enabled: !v.json });
      const { kind, version } = await migrateDatabase(databaseUrl(v, io), bar.update).finally(() => bar.finish());
      return print(v, io, { database: kind, schema_version: version }, `${kind} database at schema version ${version}\n`);
    },
  },
];

async function serve(v: Values, io: Io): Promise<number> {
  const config = loadConfig(str(v.config) ?? io.env.SVC_CONFIG);
  const level = io.env.LOG_LEVEL ?? 'info';
  if (!LOG_LEVELS.includes(level)) throw new CliError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${level}'`);
  const port = integer(str(v.port) ?? io.env.PORT ?? '8080', '--port');
  if (port > 65_535) throw new CliError(`--port must be at most 65535, got ${port}`);
  const url = databaseUrl(v, io);
  const workers = workerCountOf(str(v.workers));
  const host = str(v.host) ?? io.env.HOST ?? '0.0.0.0';
  if (workers > 1 && !isWorker()) {
    // The primary checks the config and migrates once, then only supervises.
    await (await openStore(url)).close();
    io.err.write(`svc-gateway: ${workers} workers serving http://${host.replace('0.0.0.0', '127.0.0.1')}:${port} — database ${url}\n`);
    return superviseWorkers(workers, (line) => io.err.write(`${line}\n`));
  }
  const store = await openStore(url);
  const app = await buildApp({
    config, store, env: io.env, adminToken: io.env.SVC_ADMIN_TOKEN ?? null,
    logger: { level }, defaultMetrics: true,
  });
  const address = await app.listen({ port, host });
  if (isWorker()) return untilSignal(app, store);
  const providers = config.providers.map((p) => `${p.id} (${p.type})`).join(', ');
  io.err.write(`svc-gateway serving ${address.replace('0.0.0.0', '127.0.0.1')} — database ${url}; ` +
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
