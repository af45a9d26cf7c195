/**
 * A key never mints more than it holds: a capped key creates only keys capped
 * no higher and revokes only itself, a test key creates only test keys, and an
 * uncapped live key manages them all. Refusals are 403 permission_denied and
 * change nothing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startGateway, type TestAccount, type TestGateway } from '../support/gateway.js';
import { assertError, call } from '../support/e2e.js';

interface KeyRecord {
  id: string;
  environment: string;
  daily_credit_limit: number | null;
  key?: string;
}

let gw: TestGateway;
before(async () => {
  gw = await startGateway();
});
after(() => gw.close());

/** The account's active keys, as what a refusal must leave unchanged (`last_used_at` moves with use). */
async function listKeys(key: string): Promise<KeyRecord[]> {
  const res = await call(gw, 'GET', '/v1/api-keys', { key });
  assert.equal(res.status, 200, res.text);
  return (res.json as { data: KeyRecord[] }).data
    .map(({ id, environment, daily_credit_limit }) => ({ id, environment, daily_credit_limit }));
}

async function createKey(key: string, body: unknown): Promise<KeyRecord & { key: string }> {
  const res = await call(gw, 'POST', '/v1/api-keys', { key, body });
  assert.equal(res.status, 201, res.text);
  return res.json as KeyRecord & { key: string };
}

/** Asserts a 403 permission_denied and returns its message. */
function assertDenied(res: Awaited<ReturnType<typeof call>>, param: string): string {
  return assertError(res, 403, 'permission_error', 'permission_denied', param).message;
}

/** An account whose first key is the uncapped live owner key, plus a second key made by it. */
async function accountWith(second: { environment?: 'live' | 'test'; daily_credit_limit?: number | null }) {
  const owner: TestAccount = await gw.createAccount();
  const other = await createKey(owner.key, second);
  return { owner, other };
}

describe('a key with a daily cap', () => {
  it('creates keys capped at or below its own cap, each with the cap it asked for', async () => {
    const { owner, other: capped } = await accountWith({ daily_credit_limit: 100 });
    const lower = await createKey(capped.key, { daily_credit_limit: 40, name: 'lower' });
    const equal = await createKey(capped.key, { daily_credit_limit: 100 });
    const zero = await createKey(capped.key, { daily_credit_limit: 0, environment: 'test' });
    assert.deepEqual([lower.daily_credit_limit, equal.daily_credit_limit, zero.daily_credit_limit], [40, 100, 0]);
    assert.equal(zero.environment, 'test');
    const listed = new Map((await listKeys(owner.key)).map((k) => [k.id, k.daily_credit_limit]));
    assert.deepEqual([listed.get(lower.id), listed.get(equal.id), listed.get(zero.id)], [40, 100, 0]);
    // The minted key works, under its own cap.
    assert.equal((await call(gw, 'GET', '/v1/models', { key: lower.key })).status, 200);
  });

  it('may not create a key with a higher cap, or with none (403, nothing created)', async () => {
    const { owner, other: capped } = await accountWith({ daily_credit_limit: 100 });
    const before = await listKeys(owner.key);

    const higher = assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: capped.key, body: { daily_credit_limit: 101 } }), 'daily_credit_limit');
    assert.match(higher, /daily cap of 100/);
    assert.match(higher, /not 101/);
    const omitted = assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: capped.key, body: {} }), 'daily_credit_limit');
    assert.match(omitted, /no cap/);
    assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: capped.key, body: { daily_credit_limit: null } }), 'daily_credit_limit');
    assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: capped.key }), 'daily_credit_limit');

    assert.deepEqual(await listKeys(owner.key), before);
  });

  it('revokes itself, and is refused on its next request', async () => {
    const { owner, other: capped } = await accountWith({ daily_credit_limit: 100 });
    const res = await call(gw, 'DELETE', `/v1/api-keys/${capped.id}`, { key: capped.key });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, { id: capped.id, object: 'api_key', deleted: true });
    assertError(await call(gw, 'GET', '/v1/models', { key: capped.key }), 401, 'authentication_error', 'api_key_revoked');
    assert.equal((await call(gw, 'GET', '/v1/models', { key: owner.key })).status, 200);
  });

  it('may not revoke another key, nor learn whether an id exists (403, the other key still works)', async () => {
    const { owner, other: capped } = await accountWith({ daily_credit_limit: 100 });
    const sibling = await createKey(owner.key, {});
    const before = await listKeys(owner.key);

    for (const id of [owner.keyId, sibling.id, 'key_doesnotexist0000', (await gw.createAccount()).keyId]) {
      const message = assertDenied(await call(gw, 'DELETE', `/v1/api-keys/${id}`, { key: capped.key }), 'id');
      assert.match(message, /daily cap.*only itself/);
    }

    assert.deepEqual(await listKeys(owner.key), before);
    assert.equal((await call(gw, 'GET', '/v1/models', { key: owner.key })).status, 200);
    assert.equal((await call(gw, 'GET', '/v1/models', { key: sibling.key })).status, 200);
  });

  it('validates the body before asking for permission (400, not 403)', async () => {
    const { other: capped } = await accountWith({ daily_credit_limit: 100 });
    assertError(await call(gw, 'POST', '/v1/api-keys', { key: capped.key, body: { daily_credit_limit: -1 } }),
      400, 'invalid_request_error', 'invalid_value', 'daily_credit_limit');
    assertError(await call(gw, 'POST', '/v1/api-keys', { key: capped.key, body: { environment: 'prod' } }),
      400, 'invalid_request_error', 'invalid_value', 'environment');
    assertError(await call(gw, 'POST', '/v1/api-keys', { key: capped.key, body: '[1' }), 400, 'invalid_request_error', 'invalid_json');
  });

  it('is refused as the openai SDK expects: PermissionDeniedError', async () => {
    const { other: capped } = await accountWith({ daily_credit_limit: 100 });
    await assert.rejects(gw.client(capped.key).post('/api-keys', { body: { daily_credit_limit: 1000 } }), (err: unknown) =>
      err instanceof OpenAI.PermissionDeniedError && err.status === 403 && err.code === 'permission_denied' && err.type === 'permission_error');
  });
});

describe('a test key', () => {
  it('creates test keys only: live, or no environment (which means live), is 403', async () => {
    const { owner, other: testKey } = await accountWith({ environment: 'test' });
    const made = await createKey(testKey.key, { environment: 'test', daily_credit_limit: 500 });
    assert.equal(made.environment, 'test');
    assert.match(made.key, /^svc_test_/);
    const before = await listKeys(owner.key);

    const live = assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: testKey.key, body: { environment: 'live' } }), 'environment');
    assert.match(live, /only test keys/);
    const omitted = assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: testKey.key, body: { daily_credit_limit: 5 } }), 'environment');
    assert.match(omitted, /"environment": "test"/);

    assert.deepEqual(await listKeys(owner.key), before);
  });

  it('with a cap, is held to both rules', async () => {
    const { other: cappedTest } = await accountWith({ environment: 'test', daily_credit_limit: 10 });
    assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: cappedTest.key, body: { environment: 'test', daily_credit_limit: 11 } }), 'daily_credit_limit');
    assertDenied(await call(gw, 'POST', '/v1/api-keys', { key: cappedTest.key, body: { environment: 'live', daily_credit_limit: 10 } }), 'environment');
    assert.equal((await createKey(cappedTest.key, { environment: 'test', daily_credit_limit: 10 })).daily_credit_limit, 10);
  });

  it('revokes only itself, even without a cap', async () => {
    const { owner, other: testKey } = await accountWith({ environment: 'test' });
    const message = assertDenied(await call(gw, 'DELETE', `/v1/api-keys/${owner.keyId}`, { key: testKey.key }), 'id');
    assert.match(message, /test key.*only itself/);
    assert.equal((await call(gw, 'GET', '/v1/models', { key: owner.key })).status, 200);
    assert.equal((await call(gw, 'DELETE', `/v1/api-keys/${testKey.id}`, { key: testKey.key })).status, 200);
    assertError(await call(gw, 'GET', '/v1/models', { key: testKey.key }), 401, 'authentication_error', 'api_key_revoked');
  });
});

describe('an uncapped live key', () => {
  it('creates any key and revokes the account\'s others', async () => {
    const owner = await gw.createAccount();
    const uncapped = await createKey(owner.key, {});
    const capped = await createKey(owner.key, { daily_credit_limit: 1_000_000 });
    const testKey = await createKey(owner.key, { environment: 'test' });
    assert.deepEqual([uncapped.daily_credit_limit, capped.daily_credit_limit, testKey.environment], [null, 1_000_000, 'test']);

    // A key it made manages the account just as well.
    for (const id of [capped.id, testKey.id, owner.keyId]) {
      const res = await call(gw, 'DELETE', `/v1/api-keys/${id}`, { key: uncapped.key });
      assert.equal(res.status, 200, res.text);
    }
    assertError(await call(gw, 'GET', '/v1/models', { key: capped.key }), 401, 'authentication_error', 'api_key_revoked');
    assert.deepEqual((await listKeys(uncapped.key)).map((k) => k.id), [uncapped.id]);
    // Unknown or foreign ids stay 404 for it, as before.
    assertError(await call(gw, 'DELETE', '/v1/api-keys/key_doesnotexist0000', { key: uncapped.key }), 404, 'invalid_request_error', 'api_key_not_found', 'id');
  });
});
