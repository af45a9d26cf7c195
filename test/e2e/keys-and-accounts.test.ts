/**
 * The account's own endpoints end to end, on the built-in simulator config:
 * models, credits, API keys, and where key secrets must never appear.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import OpenAI from 'openai';
import { startGateway, TestClock, type TestGateway } from '../support/gateway.js';
import { assertError, call, credits, svcOf } from '../support/e2e.js';

const T0 = '2026-11-21T12:00:00Z';

interface KeyRecord {
  id: string; object: string; name: string | null; environment: string; daily_credit_limit: number | null;
  redacted_key: string; created_at: string; last_used_at: string | null; credits_spent_today: number; key?: string;
}
const RECORD_FIELDS = ['created_at', 'credits_spent_today', 'daily_credit_limit', 'environment', 'id', 'last_used_at', 'name', 'object', 'rate_limit_rpm', 'redacted_key'];

describe('GET /v1/models', () => {
  let gw: TestGateway;
  let key: string;
  before(async () => {
    gw = await startGateway();
    key = (await gw.createAccount()).key;
  });
  after(() => gw.close());

  const catalog = [
    { id: 'svc-auto', context_window: 128_000, pricing: { input_credits_per_1k: 10, output_credits_per_1k: 30 } },
    { id: 'svc-fast', context_window: 64_000, pricing: { input_credits_per_1k: 4, output_credits_per_1k: 12 } },
    { id: 'svc-code', context_window: 128_000, pricing: { input_credits_per_1k: 12, output_credits_per_1k: 40 } },
    { id: 'svc-smart', context_window: 128_000, pricing: { input_credits_per_1k: 25, output_credits_per_1k: 75 } },
  ];

  it('lists the four aliases with their windows and prices', async () => {
    const res = await call(gw, 'GET', '/v1/models', { key });
    assert.equal(res.status, 200);
    const body = res.json as { object: string; data: Array<Record<string, unknown>> };
    assert.equal(body.object, 'list');
    assert.deepEqual(body.data.map((m) => ({ id: m.id, context_window: m.context_window, pricing: m.pricing })), catalog);
    for (const m of body.data) {
      assert.equal(m.object, 'model');
      assert.ok(typeof m.name === 'string' && m.name.length > 0);
      assert.ok(typeof m.description === 'string' && m.description.length > 0);
      assert.ok(Number.isInteger(m.created));
      assert.equal(typeof m.owned_by, 'string');
    }
    const listed = await gw.client(key).models.list();
    assert.deepEqual(listed.data.map((m) => m.id), catalog.map((c) => c.id));
  });

  it('retrieves one entry, and 404 model_not_found for an unknown id', async () => {
    const listed = (await call(gw, 'GET', '/v1/models', { key })).json as { data: Array<Record<string, unknown>> };
    const fast = await gw.client(key).models.retrieve('svc-fast');
    assert.deepEqual(fast, listed.data[1]);
    assertError(await call(gw, 'GET', '/v1/models/gpt-4o', { key }), 404, 'invalid_request_error', 'model_not_found', 'model');
    await assert.rejects(gw.client(key).models.retrieve('svc-slow'), (err: unknown) =>
      err instanceof OpenAI.NotFoundError && err.code === 'model_not_found');
  });
});

describe('GET /v1/credits', () => {
  const clock = new TestClock(T0);
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ clock });
  });
  after(() => gw.close());

  it('shows earned (soonest expiry, days rounded up) and purchased, and spends earned first', async () => {
    const { key, accountId } = await gw.createAccount({
      purchased: 500,
      earned: [
        { amount: 100, expiresAt: '2026-11-24T00:00:00Z' },
        { amount: 50, expiresAt: '2026-12-01T12:00:00Z' },
        { amount: 70, expiresAt: '2026-11-20T00:00:00Z' },
      ],
    });
    assert.deepEqual(await credits(gw, key), {
      account_id: accountId,
      total_credits: 650,
      earned_credits: { balance: 150, expires_at: '2026-11-24T00:00:00Z', days_remaining: 3 },
      purchased_credits: { balance: 500, expires_at: null },
      currency: 'SVC_CREDITS',
      reserved_credits: 0,
      available_credits: 650,
    });

    const client = gw.client(key);
    const prompt = [{ role: 'user' as const, content: 'word '.repeat(5000) }];
    const first = svcOf(await client.chat.completions.create({ model: 'svc-smart', messages: prompt }));
    assert.ok(first.credits_used > 100 && first.credits_used < 150, `first spend ${first.credits_used}`);
    const afterFirst = await credits(gw, key);
    assert.deepEqual(afterFirst.earned_credits, { balance: 150 - first.credits_used, expires_at: '2026-12-01T12:00:00Z', days_remaining: 10 });
    assert.equal(afterFirst.purchased_credits.balance, 500);
    assert.equal(afterFirst.total_credits, first.balance_remaining);

    const second = svcOf(await client.chat.completions.create({ model: 'svc-smart', messages: prompt }));
    const afterSecond = await credits(gw, key);
    assert.deepEqual(afterSecond.earned_credits, { balance: 0, expires_at: null, days_remaining: 0 });
    assert.equal(afterSecond.purchased_credits.balance, 650 - first.credits_used - second.credits_used);
    assert.deepEqual([afterSecond.total_credits, afterSecond.available_credits], [second.balance_remaining, second.balance_remaining]);
  });

  it('shows an account with no credits as zeros with no expiry', async () => {
    const { key, accountId } = await gw.createAccount({ earned: [{ amount: 30, expiresAt: '2026-11-21T11:59:59Z' }] });
    assert.deepEqual(await credits(gw, key), {
      account_id: accountId, total_credits: 0,
      earned_credits: { balance: 0, expires_at: null, days_remaining: 0 },
      purchased_credits: { balance: 0, expires_at: null }, currency: 'SVC_CREDITS', reserved_credits: 0, available_credits: 0,
    });
  });
});

describe('/v1/api-keys', () => {
  const clock = new TestClock(T0);
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ clock });
  });
  after(() => gw.close());

  const create = async (key: string, body?: unknown) => {
    const res = await call(gw, 'POST', '/v1/api-keys', { key, body });
    assert.equal(res.status, 201, res.text);
    return res.json as KeyRecord & { key: string };
  };
  const list = async (key: string) => {
    const res = await call(gw, 'GET', '/v1/api-keys', { key });
    assert.equal(res.status, 200, res.text);
    return res.json as { object: string; data: KeyRecord[] };
  };

  it('creates a key: 201, the record, and the whole secret once', async () => {
    const { key } = await gw.createAccount({ purchased: 1000 });
    const created = await create(key, { name: 'ci', environment: 'test', daily_credit_limit: 500 });
    assert.deepEqual(Object.keys(created).sort(), [...RECORD_FIELDS, 'key'].sort());
    assert.match(created.id, /^key_[0-9A-Za-z]+$/);
    assert.match(created.key, /^svc_test_[0-9A-Za-z]{28,}$/);
    const { id: _id, key: secret, ...rest } = created;
    assert.deepEqual(rest, {
      object: 'api_key', name: 'ci', environment: 'test', daily_credit_limit: 500, rate_limit_rpm: null,
      redacted_key: `svc_test_…${secret.slice(-4)}`, created_at: T0, last_used_at: null, credits_spent_today: 0,
    });
  });

  it('applies the defaults: name null, environment live, no limit', async () => {
    const { key } = await gw.createAccount({ purchased: 1000 });
    for (const body of [undefined, {}]) {
      const created = await create(key, body);
      assert.deepEqual([created.name, created.environment, created.daily_credit_limit], [null, 'live', null]);
      assert.match(created.key, /^svc_live_/);
      assert.equal(created.redacted_key, `svc_live_…${created.key.slice(-4)}`);
    }
  });

  it('refuses bad values with 400', async () => {
    const { key } = await gw.createAccount({ purchased: 1000 });
    const cases: Array<[unknown, string]> = [
      [{ environment: 'prod' }, 'environment'], [{ daily_credit_limit: -1 }, 'daily_credit_limit'],
      [{ daily_credit_limit: 1.5 }, 'daily_credit_limit'], [{ daily_credit_limit: '100' }, 'daily_credit_limit'], [{ name: 42 }, 'name'],
    ];
    for (const [body, param] of cases) {
      assertError(await call(gw, 'POST', '/v1/api-keys', { key, body }), 400, 'invalid_request_error', 'invalid_value', param);
    }
    for (const body of ['[]', 'nope', '"x"']) {
      assertError(await call(gw, 'POST', '/v1/api-keys', { key, body }), 400, 'invalid_request_error', 'invalid_json');
    }
    assert.equal((await list(key)).data.length, 1);
  });

  it('lists the active keys newest first, without secrets, and tracks use', async () => {
    const { key, keyId } = await gw.createAccount({ purchased: 100_000 });
    clock.advance(1000);
    const a = await create(key, { name: 'a' });
    clock.advance(1000);
    const b = await create(key, { name: 'b', environment: 'test' });
    clock.advance(1000);
    const c = await create(key, { name: 'c' });
    assert.equal((await call(gw, 'DELETE', `/v1/api-keys/${b.id}`, { key })).status, 200);

    const completion = await gw.client(a.key).chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] });
    const listing = await list(key);
    assert.equal(listing.object, 'list');
    assert.deepEqual(listing.data.map((k) => k.id), [c.id, a.id, keyId]);
    for (const record of listing.data) assert.deepEqual(Object.keys(record).sort(), RECORD_FIELDS);
    const text = JSON.stringify(listing);
    for (const secret of [key, a.key, b.key, c.key]) assert.ok(!text.includes(secret.slice(9)), 'a secret in the listing');
    const shownA = listing.data[1]!;
    assert.deepEqual([shownA.last_used_at, shownA.credits_spent_today], [clock.now().toISOString().replace('.000', ''), svcOf(completion).credits_used]);
    assert.equal(listing.data[0]!.last_used_at, null);
  });

  it('revokes a key: 200 body, 401 api_key_revoked on the next request, 404 the second time', async () => {
    const { key } = await gw.createAccount({ purchased: 1000 });
    const doomed = await create(key, { name: 'doomed' });
    assert.equal((await call(gw, 'GET', '/v1/credits', { key: doomed.key })).status, 200);
    const res = await call(gw, 'DELETE', `/v1/api-keys/${doomed.id}`, { key });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { id: doomed.id, object: 'api_key', deleted: true });
    assertError(await call(gw, 'GET', '/v1/credits', { key: doomed.key }), 401, 'authentication_error', 'api_key_revoked');
    await assert.rejects(
      gw.client(doomed.key).chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] }),
      (err: unknown) => err instanceof OpenAI.AuthenticationError && err.code === 'api_key_revoked',
    );
    assertError(await call(gw, 'DELETE', `/v1/api-keys/${doomed.id}`, { key }), 404, 'invalid_request_error', 'api_key_not_found', 'id');
    assertError(await call(gw, 'DELETE', '/v1/api-keys/key_0000000000000000', { key }), 404, 'invalid_request_error', 'api_key_not_found', 'id');
    assert.ok(!(await list(key)).data.some((k) => k.id === doomed.id));
  });

  it("keeps one account from listing or revoking another account's keys", async () => {
    const alice = await gw.createAccount({ purchased: 1000 });
    const bob = await gw.createAccount({ purchased: 1000 });
    const aliceExtra = await create(alice.key, { name: 'alice-2' });
    const bobsView = await list(bob.key);
    assert.deepEqual(bobsView.data.map((k) => k.id), [bob.keyId]);
    for (const id of [alice.keyId, aliceExtra.id]) {
      assertError(await call(gw, 'DELETE', `/v1/api-keys/${id}`, { key: bob.key }), 404, 'invalid_request_error', 'api_key_not_found', 'id');
    }
    assert.equal((await call(gw, 'GET', '/v1/credits', { key: aliceExtra.key })).status, 200);
    assert.equal((await list(alice.key)).data.length, 2);
  });

  it('serves svc_test_ keys', async () => {
    const { key } = await gw.createAccount({ purchased: 1000 });
    const testKey = await create(key, { environment: 'test' });
    const completion = await gw.client(testKey.key).chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(completion.model, 'svc-fast');
    assert.equal((await credits(gw, key)).total_credits, 1000 - svcOf(completion).credits_used);
  });
});

describe('key secrets at rest and in logs', () => {
  it('never writes a secret to the database files or the logs, even after failed authentication', async () => {
    const gw = await startGateway({ adminToken: 'admin-token-secrets' });
    try {
      const harness = await gw.createAccount({ purchased: 1000 });
      const viaApi = (await call(gw, 'POST', '/v1/api-keys', { key: harness.key, body: { name: 'api' } })).json as { key: string; id: string };
      const viaAdmin = (await call(gw, 'POST', `/admin/v1/accounts/${harness.accountId}/api-keys`, { key: 'admin-token-secrets', body: {} })).json as { key: string };
      const secrets = [harness.key, viaApi.key, viaAdmin.key];
      for (const secret of secrets) {
        assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key: secret, body: { model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] } })).status, 200);
      }
      await call(gw, 'DELETE', `/v1/api-keys/${viaApi.id}`, { key: harness.key });
      const lastChar = harness.key.endsWith('A') ? 'B' : 'A';
      const wrong = harness.key.slice(0, -1) + lastChar;
      const wrongEnv = harness.key.replace('svc_live_', 'svc_test_');
      for (const attempt of [viaApi.key, wrong, wrongEnv]) {
        assert.equal((await call(gw, 'GET', '/v1/credits', { key: attempt })).status, 401);
        assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key: attempt, body: '{bad' })).status, 401);
      }
      secrets.push(wrong, wrongEnv);
      // A careless client that puts its key in the URL: still not in the logs.
      assert.equal((await call(gw, 'GET', `/v1/models?api_key=${harness.key}`, { key: harness.key })).status, 200);
      assert.equal((await call(gw, 'GET', `/v1/nowhere/${harness.key}`)).status, 404);
      // …or where an id or a model belongs: the refusal does not echo it.
      const revokeBySecret = await call(gw, 'DELETE', `/v1/api-keys/${harness.key}`, { key: harness.key });
      assert.equal(revokeBySecret.status, 404);
      assert.ok(!revokeBySecret.text.includes(harness.key.slice(9)));
      assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key: harness.key, body: { model: harness.key, messages: [{ role: 'user', content: 'Hi' }] } })).status, 404);
      assert.equal((await call(gw, 'PUT', `/v1/models/${harness.key}`, { key: harness.key })).status, 405);

      if (gw.backend === 'sqlite') {
        const path = gw.databaseUrl.slice('sqlite:'.length);
        const assertClean = (when: string) => {
          const dir = dirname(path);
          const files = readdirSync(dir).map((f) => join(dir, f));
          assert.ok(files.some((f) => f.endsWith('-wal')), `no WAL file among ${files.join(', ')}`);
          // The key records themselves are there, so these are the bytes that hold them.
          assert.ok(files.some((f) => readFileSync(f).indexOf(harness.keyId) !== -1), `${when}: no key record found`);
          for (const file of files) {
            const bytes = readFileSync(file);
            for (const secret of secrets) {
              assert.equal(bytes.indexOf(secret), -1, `${when}: secret in ${file}`);
              assert.equal(bytes.indexOf(secret.slice(-32)), -1, `${when}: random part in ${file}`);
            }
          }
        };
        assertClean('before checkpoint');
        const db = new BetterSqlite3(path);
        db.pragma('wal_checkpoint(PASSIVE)');
        db.close();
        assertClean('after checkpoint');
      } else {
        // PostgreSQL's files are the server's: read every row of every table instead.
        const tables = await gw.rows<{ name: string }>(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()`);
        const dump: string[] = [];
        for (const { name } of tables) dump.push(JSON.stringify(await gw.rows(`SELECT * FROM ${name}`)));
        const text = dump.join('\n');
        assert.ok(text.includes(harness.keyId), 'no key record found');
        for (const secret of secrets) {
          assert.ok(!text.includes(secret), 'secret in the database');
          assert.ok(!text.includes(secret.slice(-32)), 'random part in the database');
        }
      }

      const logs = gw.logs.join('\n');
      assert.ok(gw.logs.length > 0);
      for (const secret of secrets) assert.ok(!logs.includes(secret.slice(9)), 'secret in logs');
    } finally {
      await gw.close();
    }
  });
});
