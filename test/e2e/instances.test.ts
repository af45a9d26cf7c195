/**
 * Three `svc-gateway serve` processes on one PostgreSQL database, as behind a
 * load balancer (issue 7, item 5). Under a load the account can only partly
 * afford, from a capped and rate-limited key and an unlimited one, the
 * guarantees of one process hold across all three: no overdraft, the cap and
 * the rate limit kept, every credit accounted for, the ledger clean. A key
 * revoked through one instance is refused by the others on the very next
 * request, and the holds of an instance killed mid-request come back through
 * the others' sweepers once its leases lapse.
 *
 * Runs only when SVC_TEST_POSTGRES_URL names a server; it creates its own
 * database `svc_test_inst_<random>` there and drops it at the end.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, it } from 'node:test';
import OpenAI from 'openai';
import { Client, escapeIdentifier } from 'pg';
import { issueApiKey } from '../../src/keys/issue.js';
import { openStore } from '../../src/store/open.js';
import type { Store } from '../../src/store/types.js';
import { completionOutcome, statusCounts, successes, waitFor, type Outcome } from '../support/e2e-helpers.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { fakeUpstreamConfig } from '../support/gateway.js';
import { describePostgres, POSTGRES_URL_VARIABLE } from '../support/store-fixture.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Instance {
  name: string;
  origin: string;
  child: ChildProcess;
  exited: Promise<unknown>;
}

interface Credits {
  total_credits: number;
  reserved_credits: number;
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitUntilServing(instance: Instance): Promise<void> {
  let dead = false;
  void instance.exited.then(() => { dead = true; });
  for (let i = 0; i < 600; i++) {
    if (dead) throw new Error(`gateway ${instance.name} exited before serving`);
    try {
      if ((await fetch(`${instance.origin}/healthz`)).ok) return;
    } catch {
      // not yet listening
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`gateway ${instance.name} did not start`);
}

async function onServer<T>(url: string, run: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** `svc-gateway ledger verify --database <url> --json`, run as its own process. */
function ledgerVerify(databaseUrl: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/main.ts', 'ledger', 'verify', '--database', databaseUrl, '--json'],
      { cwd: ROOT }, (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      });
  });
}

async function request(instance: Instance, key: string, path: string, method = 'GET'): Promise<{ status: number; body: any }> {
  const response = await fetch(`${instance.origin}${path}`, { method, headers: { authorization: `Bearer ${key}` } });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, body };
}

async function credits(instance: Instance, key: string): Promise<Credits> {
  const { status, body } = await request(instance, key, '/v1/credits');
  assert.equal(status, 200, JSON.stringify(body));
  return body as Credits;
}

function client(instance: Instance, key: string): OpenAI {
  return new OpenAI({ apiKey: key, baseURL: `${instance.origin}/v1`, maxRetries: 0, timeout: 120_000 });
}

function refusalCodes(outcomes: Outcome[]): Record<string, number> {
  const codes: Record<string, number> = {};
  for (const o of outcomes) if (o.status !== 200 && 'code' in o) codes[`${o.status} ${o.code}`] = (codes[`${o.status} ${o.code}`] ?? 0) + 1;
  return codes;
}

async function assertLedgerClean(databaseUrl: string): Promise<void> {
  const verify = await ledgerVerify(databaseUrl);
  assert.equal(verify.code, 0, `ledger verify: ${verify.stdout}${verify.stderr}`);
  assert.equal((JSON.parse(verify.stdout) as { ok: boolean }).ok, true, verify.stdout);
}

describePostgres('three serve instances on one PostgreSQL database', () => {
  let upstream: FakeUpstream;
  let dir: string;
  let databaseName: string;
  let databaseUrl: string;
  let store: Store;
  const instances: Instance[] = [];
  const A = (): Instance => instances[0]!;
  const B = (): Instance => instances[1]!;
  const C = (): Instance => instances[2]!;

  before(async () => {
    const server = process.env[POSTGRES_URL_VARIABLE]!;
    databaseName = `svc_test_inst_${randomBytes(6).toString('hex')}`;
    await onServer(server, (c) => c.query(`CREATE DATABASE ${escapeIdentifier(databaseName)}`));
    const url = new URL(server);
    url.pathname = `/${databaseName}`;
    databaseUrl = url.toString();
    store = await openStore(databaseUrl); // migrates the empty database once, before the instances start

    upstream = await startFakeUpstream({ reply: 'one two three four five six seven eight nine ten' });
    dir = mkdtempSync(join(tmpdir(), 'svc-instances-'));
    const configPath = join(dir, 'config.json');
    writeFileSync(configPath, JSON.stringify(fakeUpstreamConfig(upstream.url,
      { 'svc-smart': ['svc-smart-slow-50'], 'svc-code': ['svc-code-hang'] }, { first_byte_timeout_ms: 30_000 })));
    for (const name of ['A', 'B', 'C']) {
      const port = await freePort();
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--port', String(port), '--host', '127.0.0.1',
        '--database', databaseUrl, '--config', configPath], {
        cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, FAKE_UPSTREAM_KEY: 'sk-instances', LOG_LEVEL: 'error' },
      });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      instances.push({ name, origin: `http://127.0.0.1:${port}`, child, exited });
    }
    await Promise.all(instances.map(waitUntilServing));
  });

  after(async () => {
    await Promise.all(instances.map(async (instance) => {
      if (instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill('SIGTERM');
      await instance.exited;
    }));
    await store?.close();
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    if (databaseName) {
      await onServer(process.env[POSTGRES_URL_VARIABLE]!,
        (c) => c.query(`DROP DATABASE IF EXISTS ${escapeIdentifier(databaseName)} WITH (FORCE)`));
    }
  });

  it('keeps cap, rate limit and balance under 1,200 concurrent completions spread over the three', { timeout: 90_000 }, async () => {
    const account = await store.createAccount('instances-load');
    const start = 400; // each completion costs 1-2 credits: well under half of the 1,200 fit
    await store.grant(account.id, 'purchased', start, null);
    const CAP = 40;
    const RPM = 30;
    const capped = await issueApiKey(store, account.id, { name: 'capped', daily_credit_limit: CAP });
    const limited = await issueApiKey(store, account.id, { name: 'limited', rate_limit_rpm: RPM });
    const unlimited = await issueApiKey(store, account.id, { name: 'unlimited' });
    const keys = [capped.secret, limited.secret, unlimited.secret];
    const clients = keys.map((key) => instances.map((instance) => client(instance, key)));

    const N = 1200;
    const began = Date.now();
    const runs = await Promise.all(Array.from({ length: N }, async (_, i) => {
      const keyIndex = Math.floor((i % 6) / 2);
      const outcome = await completionOutcome(clients[keyIndex]![i % 3]!,
        { model: 'svc-smart', messages: [{ role: 'user', content: 'count' }], max_tokens: 10 }, i % 2 === 1);
      return { keyIndex, outcome };
    }));
    const elapsed = Date.now() - began;
    assert.ok(elapsed < 60_000, `the load took ${elapsed} ms, more than the rate limit's minute`);

    const all: Outcome[] = runs.map((r) => r.outcome);
    const counts = statusCounts(all);
    assert.deepEqual(Object.keys(counts).filter((s) => !['200', '402', '429'].includes(s)), [], JSON.stringify(counts));
    assert.ok((counts[200] ?? 0) > 0 && (counts[200] ?? 0) < N, `only part succeeds: ${JSON.stringify(counts)}`);

    const cappedOutcomes = runs.filter((r) => r.keyIndex === 0).map((r) => r.outcome);
    const cappedCharged = successes(cappedOutcomes).reduce((sum, o) => sum + o.svc.credits_used, 0);
    const spent = successes(all).reduce((sum, o) => sum + o.svc.credits_used, 0);
    assert.ok(cappedCharged <= CAP, `the capped key was charged ${cappedCharged} > ${CAP}`);
    assert.ok(successes(cappedOutcomes).length > 0, 'the capped key got some through');
    assert.ok(cappedOutcomes.some((o) => o.status === 429 && 'code' in o && o.code === 'daily_credit_limit_exceeded'), 'the cap was reached');

    // The rate limit is a token bucket: rpm at once, refilled at rpm a minute while the load ran.
    const limitedOutcomes = runs.filter((r) => r.keyIndex === 1).map((r) => r.outcome);
    const allowed = RPM + Math.ceil(elapsed / (60_000 / RPM));
    assert.ok(successes(limitedOutcomes).length <= allowed, `the limited key succeeded ${successes(limitedOutcomes).length} times > ${allowed}`);
    assert.ok(limitedOutcomes.some((o) => o.status === 429 && 'code' in o && o.code === 'rate_limit_exceeded'), 'the rate limit was reached');

    const final = await credits(B(), unlimited.secret);
    assert.equal(final.reserved_credits, 0, 'no hold outlives its request');
    assert.ok(final.total_credits >= 0, `overdraft: ${final.total_credits}`);
    assert.equal(start - final.total_credits, spent, 'the balance dropped by exactly what was charged');

    const listed = await request(C(), unlimited.secret, '/v1/api-keys');
    assert.equal(listed.status, 200);
    const cappedRecord = (listed.body.data as Array<{ id: string; credits_spent_today: number }>).find((k) => k.id === capped.record.id);
    assert.equal(cappedRecord?.credits_spent_today, cappedCharged, 'the capped key\'s day total is what it was charged');
    console.log(`instances load: ${JSON.stringify(counts)} in ${elapsed} ms; spent ${spent} of ${start}; capped key ${cappedCharged}/${CAP} credits, ` +
      `${successes(cappedOutcomes).length}/${RPM} requests; capped key refusals ${JSON.stringify(refusalCodes(cappedOutcomes))}`);

    await assertLedgerClean(databaseUrl);
  });

  it('refuses a key revoked through A on B and C at the very next request', { timeout: 30_000 }, async () => {
    const account = await store.createAccount('instances-revoke');
    await store.grant(account.id, 'purchased', 10_000, null);
    const admin = await issueApiKey(store, account.id, { name: 'admin' });
    const victim = await issueApiKey(store, account.id, { name: 'victim' });

    // Each instance has seen the key work (anything it might remember, it remembers now).
    for (const instance of instances) {
      assert.equal((await request(instance, victim.secret, '/v1/credits')).status, 200);
      const ok = await completionOutcome(client(instance, victim.secret),
        { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }, false);
      assert.equal(ok.status, 200, JSON.stringify(ok));
    }

    const revoked = await request(A(), admin.secret, `/v1/api-keys/${victim.record.id}`, 'DELETE');
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    assert.equal(revoked.body.deleted, true);

    for (const instance of [B(), C()]) {
      const next = await completionOutcome(client(instance, victim.secret),
        { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }, instance === C());
      assert.equal(next.status, 401, `${instance.name}: ${JSON.stringify(next)}`);
      assert.equal((next as { code?: string }).code, 'api_key_revoked', `${instance.name}: ${JSON.stringify(next)}`);
      const read = await request(instance, victim.secret, '/v1/credits');
      assert.equal(read.status, 401);
      assert.equal(read.body.error?.code, 'api_key_revoked', JSON.stringify(read.body));
    }
    assert.equal((await request(B(), admin.secret, '/v1/credits')).status, 200, 'the other key still works');
  });

  it('releases, through the others\' sweepers, the holds of an instance killed mid-request', { timeout: 90_000 }, async () => {
    const account = await store.createAccount('instances-crash');
    const start = 5_000;
    await store.grant(account.id, 'purchased', start, null);
    const { secret } = await issueApiKey(store, account.id, { name: 'crash' });

    const hanging = Array.from({ length: 5 }, () => client(C(), secret).chat.completions.create(
      { model: 'svc-code', max_tokens: 100, messages: [{ role: 'user', content: 'hang' }] }));
    const settled = Promise.allSettled(hanging);

    const held = (accountId: string) => onServer(databaseUrl, async (c) =>
      Number((await c.query(`SELECT count(*) AS n FROM reservations WHERE account_id = $1 AND state = 'held'`, [accountId])).rows[0].n));
    await waitFor(() => held(account.id), (n) => n === 5, 'five holds on C', 20_000);
    const heldBefore = await credits(A(), secret);
    assert.ok(heldBefore.reserved_credits > 0, JSON.stringify(heldBefore));
    assert.equal(heldBefore.total_credits, start);

    C().child.kill('SIGKILL');
    await C().exited;
    const results = await settled;
    assert.ok(results.every((r) => r.status === 'rejected'), 'every request to the dead instance failed');
    assert.equal((await credits(B(), secret)).reserved_credits, heldBefore.reserved_credits, 'the dead instance still holds its credits');

    // Leases are 30 s and the sweepers run every 15 s (serve takes no shorter lease): at most ~45 s.
    const began = Date.now();
    const swept = await waitFor(() => credits(A(), secret), (c) => c.reserved_credits === 0, 'the sweepers to release the holds', 60_000);
    console.log(`instances crash: ${heldBefore.reserved_credits} credits held by the killed instance released after ${Date.now() - began} ms`);
    assert.equal(swept.total_credits, start, 'the dead requests cost nothing');
    assert.equal(await held(account.id), 0);
    await assertLedgerClean(databaseUrl);
  });
});
