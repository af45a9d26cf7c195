/**
 * A key's rate_limit_rpm: set at creation, shown on the record, enforced by the
 * database in the reserving transaction (so every instance shares it), answered
 * with 429 rate_limit_exceeded, Retry-After and x-should-retry: true.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertError, call, credits } from '../support/e2e.js';
import { fakeUpstreamConfig, startGateway, TestClock, type TestGateway } from '../support/gateway.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { after, before } from 'node:test';

const body = { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 };

describe('rate_limit_rpm', { timeout: 30_000 }, () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  const clock = new TestClock('2026-11-21T12:00:00Z');
  before(async () => {
    upstream = await startFakeUpstream();
    gw = await startGateway({ config: fakeUpstreamConfig(upstream.url), clock, sweepEveryMs: 3_600_000 });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  async function limitedKey(rpm: number, purchased = 10_000): Promise<{ key: string; owner: string }> {
    const owner = await gw.createAccount({ purchased });
    const created = await call(gw, 'POST', '/v1/api-keys', { key: owner.key, body: { name: 'limited', rate_limit_rpm: rpm } });
    assert.equal(created.status, 201, created.text);
    const record = created.json as { key: string; rate_limit_rpm: number };
    assert.equal(record.rate_limit_rpm, rpm);
    return { key: record.key, owner: owner.key };
  }

  it('lets rpm requests through, then answers 429 with Retry-After and x-should-retry, and frees a slot as time passes', async () => {
    const { key } = await limitedKey(3);
    for (let i = 0; i < 3; i++) assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key, body })).status, 200);
    const before = (await credits(gw, key)).total_credits;
    const refused = await call(gw, 'POST', '/v1/chat/completions', { key, body });
    assertError(refused, 429, 'rate_limit_error', 'rate_limit_exceeded');
    assert.equal(refused.headers.get('retry-after'), '20');
    assert.equal(refused.headers.get('x-should-retry'), 'true');
    assert.equal((await credits(gw, key)).total_credits, before, 'a refused request costs nothing');
    clock.advance(20_000);
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key, body })).status, 200);
  });

  it('holds under concurrency: of 20 requests at once, exactly rpm pass', async () => {
    const { key } = await limitedKey(5);
    const results = await Promise.all(Array.from({ length: 20 }, () => call(gw, 'POST', '/v1/chat/completions', { key, body })));
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses, [...Array(5).fill(200), ...Array(15).fill(429)]);
  });

  it('counts only requests whose reservation was taken: a 402 uses no slot', async () => {
    const { key, owner } = await limitedKey(2, 0);
    for (let i = 0; i < 4; i++) assertError(await call(gw, 'POST', '/v1/chat/completions', { key, body }), 402, 'insufficient_credits', 'insufficient_credits');
    const account = (await credits(gw, owner)).account_id;
    await gw.store.grant(account, 'purchased', 1000, null);
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key, body })).status, 200);
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key, body })).status, 200);
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key, body })).status, 429);
  });

  it('refuses a bad value, and a limited key mints no key with a looser limit', async () => {
    const owner = await gw.createAccount({ purchased: 10 });
    for (const bad of [0, -1, 1.5, 'ten']) {
      assertError(await call(gw, 'POST', '/v1/api-keys', { key: owner.key, body: { rate_limit_rpm: bad } }), 400, 'invalid_request_error', 'invalid_value', 'rate_limit_rpm');
    }
    const { key } = await limitedKey(10);
    assertError(await call(gw, 'POST', '/v1/api-keys', { key, body: {} }), 403, 'permission_error', 'permission_denied', 'rate_limit_rpm');
    assertError(await call(gw, 'POST', '/v1/api-keys', { key, body: { rate_limit_rpm: 11 } }), 403, 'permission_error', 'permission_denied', 'rate_limit_rpm');
    assert.equal((await call(gw, 'POST', '/v1/api-keys', { key, body: { rate_limit_rpm: 10 } })).status, 201);
    const listed = await call(gw, 'GET', '/v1/api-keys', { key });
    assert.ok((listed.json as { data: Array<{ rate_limit_rpm: number | null }> }).data.every((k) => 'rate_limit_rpm' in k));
  });
});
