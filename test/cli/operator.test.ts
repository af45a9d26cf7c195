/**
 * The operator's read commands and `keys revoke`, run as an operator runs them
 * (their own process, `--database` naming the ledger a real gateway serves),
 * on each store: `--json` answers exactly what the API answers for the same
 * resource, the tables show the same figures, and a revoked key is refused by
 * the gateway from then on.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { utcDay } from '../../src/clock.js';
import { DEFAULT_CONFIG_SOURCE, parseConfig } from '../../src/config.js';
import { issueApiKey } from '../../src/keys/issue.js';
import { forEachBackend, openTempStore, type TempStore } from '../support/store-fixture.js';

interface Run { code: number; stdout: string; stderr: string }

const ADMIN_TOKEN = 'admin-token-for-cli-tests';

function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr });
    });
  });
}

forEachBackend('svc-gateway operator commands', (backend) => {
  // A suite of its own, so that its gateway and database close before the backend's test database is dropped.
  describe('against a gateway', () => {
    let temp: TempStore;
    let app: FastifyInstance;
    let origin: string;
    let accountId: string;
    let keyId: string;
    let secret: string;

    const api = async (path: string, token: string): Promise<{ status: number; body: unknown }> => {
      const res = await fetch(`${origin}${path}`, { headers: { authorization: `Bearer ${token}` } });
      return { status: res.status, body: await res.json() };
    };
    /** The command with `--json` on the gateway's database: its exit code 0 and nothing on stderr, its JSON. */
    const json = async (...args: string[]): Promise<unknown> => {
      const run = await cli([...args, '--json', '--database', temp.url]);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(run.stderr, '');
      return JSON.parse(run.stdout);
    };
    const text = async (...args: string[]): Promise<string> => {
      const run = await cli([...args, '--database', temp.url]);
      assert.equal(run.code, 0, run.stderr);
      return run.stdout;
    };

    before(async () => {
      temp = await openTempStore(undefined, backend);
      app = await buildApp({ config: parseConfig(DEFAULT_CONFIG_SOURCE), store: temp.store, adminToken: ADMIN_TOKEN, logger: false });
      origin = await app.listen({ port: 0, host: '127.0.0.1' });
      const account = await temp.store.createAccount('ops');
      accountId = account.id;
      await temp.store.grant(accountId, 'earned', 500, new Date('2099-01-01T00:00:00Z'));
      await temp.store.grant(accountId, 'purchased', 100_000, null);
      const issued = await issueApiKey(temp.store, accountId, { name: 'ci', daily_credit_limit: 50_000 });
      keyId = issued.record.id;
      secret = issued.secret;
      await temp.store.createAccount('other');
      const completion = await fetch(`${origin}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'Say hello to the operator.' }] }),
      });
      assert.equal(completion.status, 200, await completion.text());
    });

    after(async () => {
      await app.close();
      await temp.cleanup();
    });

    it('answers with --json exactly what the API answers for the same resource', async () => {
      const today = utcDay(new Date());
      assert.deepEqual(await json('accounts', 'show', '--account', accountId), (await api(`/admin/v1/accounts/${accountId}`, ADMIN_TOKEN)).body);
      assert.deepEqual(await json('accounts', 'list', '--limit', '100'), (await api('/admin/v1/accounts?limit=100', ADMIN_TOKEN)).body);
      const credits = (await api('/v1/credits', secret)).body as { total_credits: number; reserved_credits: number };
      assert.deepEqual(await json('credits', 'show', '--account', accountId), credits);
      assert.equal(credits.reserved_credits, 0);
      assert.ok(credits.total_credits < 100_500, 'the completion was charged');
      assert.deepEqual(await json('keys', 'list', '--account', accountId), (await api('/v1/api-keys', secret)).body);

      const usage = await json('usage', '--account', accountId) as { total_requests: number; daily: Array<{ model: string; date: string }> };
      assert.deepEqual(usage, (await api('/v1/usage', secret)).body);
      assert.equal(usage.total_requests, 1);
      assert.deepEqual(usage.daily.map((d) => [d.date, d.model]), [[today, 'svc-fast']]);
      const chosen = await json('usage', '--account', accountId, '--start-date', today, '--end-date', today, '--model', 'svc-smart');
      assert.deepEqual(chosen, (await api(`/v1/usage?start_date=${today}&end_date=${today}&model=svc-smart`, secret)).body);
      assert.equal((chosen as { total_requests: number }).total_requests, 0);
    });

    it('shows the same figures as tables', async () => {
      const credits = (await api('/v1/credits', secret)).body as {
        total_credits: number; available_credits: number; earned_credits: { balance: number }; purchased_credits: { balance: number };
      };
      const { earned_credits: earned, purchased_credits: purchased, available_credits: available } = credits;
      const accounts = await text('accounts', 'list');
      assert.match(accounts, /^ID +NAME +CREATED +EARNED +PURCHASED +RESERVED +AVAILABLE\n/);
      assert.match(accounts, new RegExp(`^${accountId} +ops +\\S+ +${earned.balance} +${purchased.balance} +0 +${available}$`, 'm'));
      assert.equal(accounts.trimEnd().split('\n').length, 3, 'a header and two accounts');

      const shown = await text('accounts', 'show', '--account', accountId);
      assert.match(shown, new RegExp(`^account +${accountId}$`, 'm'));
      assert.match(shown, /^earned expires +2099-01-01T00:00:00Z \(\d+ days\)$/m);
      assert.match(shown, new RegExp(`^total +${credits.total_credits}$`, 'm'));

      const keys = await text('keys', 'list', '--account', accountId);
      assert.match(keys, /^ID +NAME +ENV +KEY +DAILY LIMIT +RPM +SPENT TODAY +CREATED +LAST USED\n/);
      assert.match(keys, new RegExp(`^${keyId} +ci +live +svc_live_…\\w{4} +50000 +- +\\d+ `, 'm'));
      assert.doesNotMatch(keys, new RegExp(secret));

      const usage = await text('usage', '--account', accountId);
      assert.match(usage, new RegExp(`^usage of ${accountId}, \\d{4}-\\d{2}-\\d{2} to ${utcDay(new Date())} \\(UTC\\)\n`));
      assert.match(usage, new RegExp(`^${utcDay(new Date())} +svc-fast +1 +\\d+ +\\d+ +\\d+$`, 'm'));
      assert.match(usage, /^total +1 +\d+ +\d+ +\d+$/m);
    });

    it('revokes a key: the gateway refuses it from then on, and keys list no longer shows it', async () => {
      assert.equal((await api('/v1/credits', secret)).status, 200);
      assert.equal(await text('keys', 'revoke', '--account', accountId, '--key', keyId), `revoked ${keyId} of ${accountId}\n`);
      const refused = await api('/v1/credits', secret);
      assert.equal(refused.status, 401);
      assert.equal((refused.body as { error: { code: string } }).error.code, 'api_key_revoked');
      const row = await temp.row<{ revoked_at: number | null }>('SELECT revoked_at FROM api_keys WHERE id = ?', keyId);
      assert.notEqual(row?.revoked_at ?? null, null);
      assert.deepEqual(await json('keys', 'list', '--account', accountId), { object: 'list', data: [] });

      // With --json, what DELETE /v1/api-keys/{id} answers: asked of the gateway with one key, of the CLI for another.
      const [second, third] = [await issueApiKey(temp.store, accountId, {}), await issueApiKey(temp.store, accountId, {})];
      const deleted = await fetch(`${origin}/v1/api-keys/${third.record.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${second.secret}` } });
      const answer = { ...(await deleted.json() as Record<string, unknown>), id: second.record.id };
      assert.deepEqual(await json('keys', 'revoke', '--account', accountId, '--key', second.record.id), answer);

      const again = await cli(['keys', 'revoke', '--account', accountId, '--key', keyId, '--database', temp.url]);
      assert.equal(again.code, 1);
      assert.match(again.stderr, new RegExp(`no active key ${keyId} on account ${accountId}`));
    });

    it('answers an unknown account with exit code 1 and its id', async () => {
      for (const args of [['accounts', 'show'], ['credits', 'show'], ['keys', 'list'], ['usage']]) {
        const run = await cli([...args, '--account', 'acct_nope', '--database', temp.url]);
        assert.equal(run.code, 1, `${args.join(' ')}: ${run.stderr}`);
        assert.equal(run.stderr, 'svc-gateway: no account acct_nope\n');
        assert.equal(run.stdout, '');
      }
    });
  });
});
