/**
 * A key's `rate_limit_rpm`, held by the store in the reserving transaction
 * (GCRA on the key row), on each backend: checked before the daily cap and the
 * credits, counted only once a reservation is taken, and writing nothing when
 * it refuses.
 */
import { afterEach, beforeEach, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestClock } from '../support/gateway.js';
import { forEachBackend, makeAccount, openTempStore, reserveFor, type TempStore } from '../support/store-fixture.js';

const REFUSED = { ok: false, reason: 'rate_limit', message: 'This key allows 3 requests per minute.', retryAfterSeconds: 20 };

forEachBackend('store rate limit', (backend) => {
  let clock: TestClock;
  let t: TempStore;

  beforeEach(async () => {
    clock = new TestClock('2026-11-21T12:00:00Z');
    t = await openTempStore(clock, backend);
  });
  afterEach(async () => {
    await t.cleanup();
  });

  const tat = async (keyId: string) => (await t.row<{ rate_tat: number }>('SELECT rate_tat FROM api_keys WHERE id = ?', keyId))?.rate_tat;

  it('rpm 3: three pass, the fourth is refused with Retry-After, and 20 s later one more passes', async () => {
    const a = await makeAccount(t.store, { purchased: 1000, rateLimitRpm: 3 });
    assert.equal((await t.store.findApiKey(a.keyId))?.rateLimitRpm, 3);
    for (let i = 0; i < 3; i++) assert.equal((await reserveFor(t.store, a, 1)).outcome.ok, true, `request ${i + 1}`);
    const before = await tat(a.keyId);
    const refused = await reserveFor(t.store, a, 1);
    assert.deepEqual(refused.outcome, REFUSED);
    assert.equal(await tat(a.keyId), before, 'a refusal writes nothing');
    assert.equal((await t.store.balances(a.accountId)).reserved, 3);

    clock.advance(19_999);
    assert.equal((await reserveFor(t.store, a, 1)).outcome.ok, false);
    clock.advance(1);
    assert.equal((await reserveFor(t.store, a, 1)).outcome.ok, true);
    assert.deepEqual((await reserveFor(t.store, a, 1)).outcome, REFUSED);
  });

  it('a request refused for credits or the daily cap does not use a slot', async () => {
    const a = await makeAccount(t.store, { purchased: 10, rateLimitRpm: 3, dailyCreditLimit: 5 });
    assert.equal((await reserveFor(t.store, a, 6)).outcome.ok, false, 'over the cap');
    assert.equal((await reserveFor(t.store, a, 100)).outcome.ok, false, 'over the cap and the credits');
    assert.equal(await tat(a.keyId), 0);
    for (let i = 0; i < 3; i++) assert.equal((await reserveFor(t.store, a, 1)).outcome.ok, true, `request ${i + 1}`);
    // The rate limit is checked first: the fourth is refused for its rate even though it also passes the cap.
    assert.deepEqual((await reserveFor(t.store, a, 100)).outcome, REFUSED);
  });

  it('a key without a limit is never refused for its rate', async () => {
    const a = await makeAccount(t.store, { purchased: 1000 });
    assert.equal((await t.store.findApiKey(a.keyId))?.rateLimitRpm, null);
    for (let i = 0; i < 50; i++) assert.equal((await reserveFor(t.store, a, 1)).outcome.ok, true);
    assert.equal(await tat(a.keyId), 0);
  });
});
