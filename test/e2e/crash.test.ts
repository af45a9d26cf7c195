/**
 * A gateway process killed with SIGKILL: what it committed survives (WAL with
 * synchronous=FULL), and the credits its in-flight request held come back once
 * the lease lapses, released by another instance exactly once.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { issueApiKey } from '../../src/keys/issue.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';

const LEASE_MS = 400;

function startGatewayProcess(dbPath: string, upstreamUrl: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/gateway-process.ts', dbPath, upstreamUrl, String(LEASE_MS)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve({ child, url: (JSON.parse(line) as { url: string }).url }));
    child.once('exit', (code) => reject(new Error(`gateway process exited with ${code}`)));
  });
}

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await sleep(25);
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe('a gateway process killed mid-request', () => {
  let upstream: FakeUpstream;
  let dir: string;

  before(async () => {
    upstream = await startFakeUpstream();
    dir = mkdtempSync(join(tmpdir(), 'svc-crash-'));
  });
  after(async () => {
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps committed charges and releases the held credits once, after the lease', async () => {
    const dbPath = join(dir, 'gateway.db');
    const setup = SqliteStore.open(dbPath);
    const account = await setup.createAccount('crash');
    await setup.grant(account.id, 'purchased', 50_000, null);
    const { secret } = await issueApiKey(setup, account.id, {});
    await setup.close();

    const gateway = await startGatewayProcess(dbPath, upstream.url);
    const client = new OpenAI({ apiKey: secret, baseURL: gateway.url, maxRetries: 0 });
    const done = await client.chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'one two three' }] });
    const charged = (done as unknown as { svc: { credits_used: number } }).svc.credits_used;
    assert.ok(charged > 0);

    // A request to a hanging upstream holds credits; then the process dies without a word.
    const hanging = client.chat.completions.create({ model: 'svc-smart', max_tokens: 1000, messages: [{ role: 'user', content: 'hang' }] });
    hanging.catch(() => undefined);
    const observer = SqliteStore.open(dbPath);
    await waitFor(async () => (await observer.balances(account.id)).reserved > 0, 'the hold');
    const held = (await observer.balances(account.id)).reserved;
    gateway.child.kill('SIGKILL');
    await new Promise((resolve) => gateway.child.once('exit', resolve));
    await assert.rejects(hanging);

    const afterCrash = await observer.balances(account.id);
    assert.equal(afterCrash.purchased, 50_000 - charged, 'the settled charge survived the crash');
    assert.equal(afterCrash.reserved, held, 'the dead process still holds its reservation');
    assert.equal(await observer.releaseExpiredLeases(), 0, 'nothing is released before the lease lapses');

    await sleep(LEASE_MS + 100);
    const second = SqliteStore.open(dbPath);
    const released = await Promise.all([observer.releaseExpiredLeases(), second.releaseExpiredLeases()]);
    assert.equal(released[0] + released[1], 1, 'released exactly once between two instances');
    const final = await observer.balances(account.id);
    assert.equal(final.reserved, 0);
    assert.equal(final.purchased, 50_000 - charged, 'the dead request cost nothing');
    assert.deepEqual((await observer.verifyLedger()).disagreements, []);
    await second.close();
    await observer.close();
  });
});
