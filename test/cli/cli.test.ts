/** The `svc-gateway` binary as an operator runs it: commands, --json, exit codes, serve. */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';

const dir = mkdtempSync(join(tmpdir(), 'svc-cli-'));
const database = `sqlite:${join(dir, 'cli.db')}`;

interface Run { code: number; stdout: string; stderr: string }

function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('svc-gateway CLI', () => {
  it('creates an account with a first key, grants credits, creates keys, verifies the ledger', async () => {
    const created = await cli(['accounts', 'create', '--name', 'ops', '--json', '--database', database]);
    assert.equal(created.code, 0, created.stderr);
    const { account, api_key } = JSON.parse(created.stdout) as { account: { id: string; name: string }; api_key: { key: string; id: string } };
    assert.match(account.id, /^acct_/);
    assert.equal(account.name, 'ops');
    assert.match(api_key.key, /^svc_live_[0-9A-Za-z]{48}$/);

    const grant = await cli(['credits', 'grant', '--account', account.id, '--kind', 'earned', '--amount', '500',
      '--expires-at', '2099-01-01T00:00:00Z', '--json'], { DATABASE_URL: database });
    assert.equal(grant.code, 0, grant.stderr);
    assert.deepEqual({ ...(JSON.parse(grant.stdout) as Record<string, unknown>), id: 'x', created_at: 'x' }, {
      id: 'x', object: 'credit_grant', account_id: account.id, kind: 'earned', amount: 500, expires_at: '2099-01-01T00:00:00Z', created_at: 'x',
    });

    const key = await cli(['keys', 'create', '--account', account.id, '--environment', 'test', '--daily-limit', '100', '--json', '--database', database]);
    assert.equal(key.code, 0, key.stderr);
    const record = JSON.parse(key.stdout) as { key: string; environment: string; daily_credit_limit: number };
    assert.match(record.key, /^svc_test_/);
    assert.equal(record.daily_credit_limit, 100);

    const text = await cli(['accounts', 'create', '--database', database]);
    assert.match(text.stdout, /^account {2}acct_\w+\napi key {2}svc_live_\w+\n/);

    const verify = await cli(['ledger', 'verify', '--json', '--database', database]);
    assert.equal(verify.code, 0, verify.stderr);
    assert.deepEqual(JSON.parse(verify.stdout), { ok: true, accounts: 2, grants: 1, entries: 1, disagreements: [] });
  });

  it('refuses bad input with exit code 2 and a message naming the option', async () => {
    const created = JSON.parse((await cli(['accounts', 'create', '--json', '--database', database])).stdout) as { account: { id: string } };
    const cases: Array<[string[], RegExp]> = [
      [['credits', 'grant', '--account', created.account.id, '--kind', 'earned', '--amount', '5'], /--expires-at: earned credits need expires_at/],
      [['credits', 'grant', '--account', created.account.id, '--kind', 'purchased', '--amount', '5', '--expires-at', '2099-01-01'], /purchased credits do not expire/],
      [['credits', 'grant', '--account', created.account.id, '--kind', 'gift', '--amount', '5'], /--kind must be earned or purchased/],
      [['credits', 'grant', '--account', created.account.id, '--kind', 'purchased', '--amount=-5'], /--amount must be a non-negative integer/],
      [['keys', 'create', '--account', created.account.id, '--environment', 'prod'], /--environment must be live or test/],
      [['keys', 'create'], /--account is required/],
      [['accounts', 'create', '--bogus'], /unknown option '--bogus'/],
    ];
    for (const [args, message] of cases) {
      const run = await cli([...args, '--database', database]);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message);
    }
    const unknown = await cli(['frobnicate']);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /unknown command 'frobnicate'/);
    // Not a usage error: the command was right, the account does not exist (exit 1).
    const missing = await cli(['credits', 'grant', '--account', 'acct_nope', '--kind', 'purchased', '--amount', '5', '--database', database]);
    assert.equal(missing.code, 1, missing.stderr);
    assert.match(missing.stderr, /no account acct_nope/);
  });

  it('will not serve with a bad config, naming the field', async () => {
    const path = join(dir, 'bad.yaml');
    writeFileSync(path, 'providers:\n  - { id: p, type: simulator }\nmodels:\n  - { id: m, name: M, context_window: 10, pricing: { input_credits_per_1k: 1, output_credits_per_1k: 1 }, routes: [{ provider: q, model: x }] }\n');
    const run = await cli(['serve', '--config', path, '--port', '0', '--database', database]);
    assert.equal(run.code, 2);
    assert.match(run.stderr, /models\[0\]\.routes\[0\]\.provider: unknown provider 'q'/);
  });

  it('will not serve with a bad LOG_LEVEL or port', async () => {
    const level = await cli(['serve', '--port', '0', '--database', database], { LOG_LEVEL: 'verbose' });
    assert.equal(level.code, 2);
    assert.match(level.stderr, /LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got 'verbose'/);
    const port = await cli(['serve', '--port', '70000', '--database', database]);
    assert.equal(port.code, 2);
    assert.match(port.stderr, /--port must be at most 65535/);
  });

  it('serves, answers /healthz, and stops cleanly on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--port', '0', '--host', '127.0.0.1', '--database', database], {
      stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LOG_LEVEL: 'warn' },
    });
    const line = await new Promise<string>((resolve) => {
      createInterface({ input: child.stderr! }).on('line', (l) => { if (l.includes('serving')) resolve(l); });
    });
    const origin = /serving (http:\/\/[\d.:]+)/.exec(line)![1]!;
    const health = await fetch(`${origin}/healthz`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const ready = await fetch(`${origin}/readyz`);
    assert.deepEqual(await ready.json(), { status: 'ready', database: 'sqlite' });
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 0);
  });
});
