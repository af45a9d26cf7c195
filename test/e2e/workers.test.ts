/**
 * `svc-gateway serve --workers 2`: two processes on one port and one ledger
 * (an SQLite file, or PostgreSQL in the suite's PostgreSQL pass), under a load
 * the account can only partly afford. The guarantees of one process hold: no
 * overdraft, every credit accounted for, the ledger clean.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';
import { issueApiKey } from '../../src/keys/issue.js';
import { completionOutcome, ledgerVerifyCli, statusCounts, successes } from '../support/e2e-helpers.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { E2E_BACKEND, fakeUpstreamConfig } from '../support/gateway.js';
import { openTempStore, type TempStore } from '../support/store-fixture.js';

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function waitUntilServing(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      // not yet listening
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the gateway did not start');
}

describe(`serve --workers 2 on one ${E2E_BACKEND} ledger`, { timeout: 120_000 }, () => {
  let upstream: FakeUpstream;
  let dir: string;
  let child: ChildProcess;
  let origin: string;
  let ledger: TempStore;

  before(async () => {
    upstream = await startFakeUpstream({ reply: 'one two three four five six seven eight nine ten' });
    dir = mkdtempSync(join(tmpdir(), 'svc-workers-'));
    ledger = await openTempStore(undefined, E2E_BACKEND);
    const configPath = join(dir, 'config.json');
    writeFileSync(configPath, JSON.stringify(fakeUpstreamConfig(upstream.url, {}, { first_byte_timeout_ms: 20_000 })));
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve', '--workers', '2', '--port', String(port), '--host', '127.0.0.1',
      '--database', ledger.url, '--config', configPath], {
      stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, FAKE_UPSTREAM_KEY: 'sk-workers', LOG_LEVEL: 'warn' },
    });
    await waitUntilServing(origin);
  });
  after(async () => {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    await upstream.close();
    await ledger.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  it('never overdraws and accounts for every credit under 150 concurrent completions', async () => {
    const store = ledger.store;
    const account = await store.createAccount('workers');
    const start = 100; // about 60 of the 150 fit (1-2 credits each)
    await store.grant(account.id, 'purchased', start, null);
    const { secret } = await issueApiKey(store, account.id, {});

    const client = new OpenAI({ apiKey: secret, baseURL: `${origin}/v1`, maxRetries: 0, timeout: 60_000 });
    const outcomes = await Promise.all(Array.from({ length: 150 }, (_, i) =>
      completionOutcome(client, { model: 'svc-smart', messages: [{ role: 'user', content: 'count' }], max_tokens: 10 }, i % 2 === 1)));
    const counts = statusCounts(outcomes);
    assert.deepEqual(Object.keys(counts).sort(), ['200', '402'], JSON.stringify(counts));
    const spent = successes(outcomes).reduce((sum, o) => sum + o.svc.credits_used, 0);

    const credits = await (await fetch(`${origin}/v1/credits`, { headers: { authorization: `Bearer ${secret}` } })).json() as
      { total_credits: number; reserved_credits: number };
    assert.equal(credits.reserved_credits, 0);
    assert.ok(credits.total_credits >= 0);
    assert.equal(start - credits.total_credits, spent, 'the balance dropped by exactly what was charged');
    assert.equal((await ledgerVerifyCli(ledger.url)).code, 0);
  });
});
