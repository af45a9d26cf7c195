/**
 * What PostgreSQL must add to the shared store tests: several connections and
 * several instances (Stores with their own pools) on one database at once keep
 * the guarantees of one process — no overdraft, no double spend, one daily cap,
 * one rate limit, one claim per Idempotency-Key, each lapsed hold closed once,
 * revocation seen at once — and their transactions never deadlock.
 * Runs only with SVC_TEST_POSTGRES_URL.
 */
import { afterEach, beforeEach, it } from 'node:test';
import assert from 'node:assert/strict';
import { issueApiKey } from '../../src/keys/issue.js';
import { newId } from '../../src/ids.js';
import { PostgresStore } from '../../src/store/postgres/store.js';
import type { Store } from '../../src/store/types.js';
import { TestClock } from '../support/gateway.js';
import {
  count, describePostgres, emptyPostgresSchema, makeAccount, openTempStore, reserveFor, take, type FixtureAccount, type TempStore,
} from '../support/store-fixture.js';

describePostgres('PostgreSQL store under concurrency', () => {
  let clock: TestClock;
  let t: TempStore;

  beforeEach(async () => {
    clock = new TestClock('2026-11-21T12:00:00Z');
    t = await openTempStore(clock, 'postgres', { poolSize: 4 });
  });
  afterEach(async () => {
    await t.cleanup();
  });

  /** Deadlocks PostgreSQL detected in this database so far (its statistics, flushed as connections end). */
  async function deadlocks(): Promise<number> {
    await new Promise((resolve) => setTimeout(resolve, 1100));
    return (await t.row<{ n: number }>('SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()'))?.n ?? 0;
  }

  async function ledgerAgrees(store: Store): Promise<void> {
    assert.deepEqual((await store.verifyLedger()).disagreements, []);
    assert.equal(await count(t, 'grants', 'balance < 0 OR held < 0 OR held > balance'), 0);
  }

  it('200 reserve/settle cycles at once on one account from 4 connections: no overdraft, and every sum agrees', async () => {
    const a = await makeAccount(t.store, { purchased: 700, earned: [{ amount: 300, expiresAt: '2099-01-01T00:00:00Z' }] });
    const results = await Promise.all(Array.from({ length: 200 }, async (_, i) => {
      const r = await reserveFor(t.store, a, 10);
      if (!r.outcome.ok) return { refused: true, asked: 0, charged: 0, shortfall: 0 };
      if (i % 7 === 0) {
        await t.store.release(r.id);
        return { refused: false, asked: 0, charged: 0, shortfall: 0 };
      }
      const asked = 4 + (i * 3) % 11; // 4 … 14: below, at and above the reservation
      const settled = await t.store.settle({ reservationId: r.id, credits: asked, promptTokens: 5, completionTokens: asked, routedModel: 'm' });
      return { refused: false, asked, charged: settled.charged, shortfall: settled.shortfall };
    }));
    const refused = results.filter((r) => r.refused).length;
    const charged = results.reduce((n, r) => n + r.charged, 0);
    assert.ok(refused > 0 && refused < 200, `refused ${refused}`);
    for (const r of results) assert.equal(r.charged + r.shortfall, r.asked);
    const b = await t.store.balances(a.accountId);
    assert.equal(b.reserved, 0);
    assert.equal(1000 - (b.earned + b.purchased), charged);
    const ledger = await t.row<{ charged: number; shortfall: number }>(`SELECT -SUM(amount) AS charged, SUM(shortfall) AS shortfall
      FROM ledger WHERE account_id = ? AND entry IN ('charge', 'shortfall')`, a.accountId);
    assert.deepEqual(ledger, { charged, shortfall: results.reduce((n, r) => n + r.shortfall, 0) });
    assert.equal(await count(t, 'reservations'), 200 - refused);
    await ledgerAgrees(t.store);
  });

  it('reserves, settles, releases and sweeps on one account, several keys and two instances never deadlock', { timeout: 60_000 }, async () => {
    const before = await deadlocks();
    const other = await t.openAnother(clock, { poolSize: 4 });
    const a = await makeAccount(t.store, {
      purchased: 3000, earned: [{ amount: 500, expiresAt: '2099-01-01T00:00:00Z' }, { amount: 400, expiresAt: '2098-01-01T00:00:00Z' }],
      dailyCreditLimit: 400,
    });
    const keys = [a.keyId];
    for (const limit of [null, 300, null]) keys.push((await issueApiKey(t.store, a.accountId, { daily_credit_limit: limit })).record.id);
    let working = true;
    const sweepers = [t.store, other].map(async (store) => {
      let swept = 0;
      while (working) swept += await store.releaseExpiredLeases();
      return swept;
    });
    // Grants committed meanwhile: a transaction uses only the grants it locked, so these cannot break the lock order.
    const granting = (async () => {
      for (let i = 0; i < 20 && working; i++) await other.grant(a.accountId, i % 2 ? 'purchased' : 'earned', 10, i % 2 ? null : new Date('2099-06-01T00:00:00Z'));
    })();
    const errors: unknown[] = [];
    await Promise.all(Array.from({ length: 160 }, async (_, i) => {
      const store = i % 2 === 0 ? t.store : other;
      try {
        // Every third reservation's lease has lapsed already: the sweepers race its own request for it.
        const r = await reserveFor(store, a, 1 + (i % 10), { keyId: keys[i % keys.length], leaseMs: i % 3 === 0 ? -1 : 30_000 });
        if (!r.outcome.ok) return;
        if (i % 5 === 0) await store.renewLease(r.id, 30_000, { credits: 2, promptTokens: 1, completionTokens: 1, routedModel: 'm' });
        if (i % 4 === 0) await store.release(r.id);
        else await store.settle({ reservationId: r.id, credits: i % 13, promptTokens: 1, completionTokens: 1, routedModel: 'm' });
      } catch (err) {
        errors.push(err);
      }
    }));
    working = false;
    await Promise.all([...sweepers, granting]);
    assert.deepEqual(errors, []);
    await other.close();
    assert.equal(await deadlocks(), before, 'no deadlock was detected, not even one that a retry hid');
    assert.equal(await count(t, 'reservations', `state = 'held'`), 0);
    const over = await t.rows(`SELECT d.key_id FROM key_days d JOIN api_keys k ON k.id = d.key_id
      WHERE k.daily_credit_limit IS NOT NULL AND d.spent > k.daily_credit_limit`);
    assert.deepEqual(over, [], 'no key over its daily cap');
    await ledgerAgrees(t.store);
  });

  it('two instances sweeping the same lapsed holds close each exactly once', async () => {
    const other = await t.openAnother(clock);
    const a = await makeAccount(t.store, { purchased: 1000 });
    const ids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const r = await reserveFor(t.store, a, 5, { leaseMs: 1000 });
      if (i % 3 === 0) await t.store.renewLease(r.id, 1000, { credits: 3, promptTokens: 1, completionTokens: 2, routedModel: 'm' });
      ids.push(r.id);
    }
    clock.advance(1001);
    const counts = await Promise.all([t.store, other, t.store, other].map((s) => s.releaseExpiredLeases()));
    assert.equal(counts.reduce((x, y) => x + y, 0), 60, String(counts));
    assert.equal(await count(t, 'reservations', `state = 'lapsed'`), 40);
    assert.equal(await count(t, 'reservations', `state = 'settled'`), 20);
    assert.equal(await count(t, 'completions'), 20);
    const charges = await t.rows<{ id: string; n: number; total: number }>(`SELECT reservation_id AS id, COUNT(*) AS n, -SUM(amount) AS total
      FROM ledger WHERE entry = 'charge' GROUP BY reservation_id`);
    assert.equal(charges.length, 20);
    for (const c of charges) assert.deepEqual([c.n, c.total], [1, 3], c.id);
    assert.deepEqual(await t.store.balances(a.accountId), { earned: 0, purchased: 940, earnedExpiresAt: null, reserved: 0 });
    assert.deepEqual(await Promise.all([t.store.releaseExpiredLeases(), other.releaseExpiredLeases()]), [0, 0]);
    await ledgerAgrees(other);
  });

  it('a daily cap, a rate limit and an Idempotency-Key hold across instances', async () => {
    const other = await t.openAnother(clock);
    const stores = [t.store, other];
    const capped = await makeAccount(t.store, { purchased: 1000, dailyCreditLimit: 50 });
    const capOutcomes = await Promise.all(Array.from({ length: 30 }, (_, i) => reserveFor(stores[i % 2]!, capped, 5)));
    assert.equal(capOutcomes.filter((r) => r.outcome.ok).length, 10);
    assert.ok(capOutcomes.every((r) => r.outcome.ok || r.outcome.reason === 'daily_cap'));

    const paced = await makeAccount(t.store, { purchased: 1000, rateLimitRpm: 5 });
    const paceOutcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => reserveFor(stores[i % 2]!, paced, 1)));
    assert.equal(paceOutcomes.filter((r) => r.outcome.ok).length, 5);
    assert.ok(paceOutcomes.every((r) => r.outcome.ok || r.outcome.reason === 'rate_limit'));

    const claims = await Promise.all(Array.from({ length: 10 }, (_, i) => stores[i % 2]!.claimIdempotencyKey(paced.accountId, 'idem', 'f')));
    assert.deepEqual(claims.map((c) => c.state).sort(), ['claimed', ...Array<string>(9).fill('running')]);
    await ledgerAgrees(t.store);
  });

  it('a key revoked on one instance is revoked on every other for the very next look-up', async () => {
    const other = await t.openAnother(clock);
    const a: FixtureAccount = await makeAccount(t.store, { purchased: 10 });
    assert.equal((await other.findApiKey(a.keyId))?.revokedAt, null);
    assert.equal(await t.store.revokeApiKey(a.accountId, a.keyId), true);
    assert.deepEqual((await other.findApiKey(a.keyId))?.revokedAt, clock.now());
    assert.deepEqual(await other.listApiKeys(a.accountId), []);
    assert.equal(await other.revokeApiKey(a.accountId, a.keyId), false);
  });

  it('a settle or release whose guarded write fails in SQL, sent with its COMMIT, commits nothing of it', async () => {
    const a = await makeAccount(t.store, { purchased: 10 });
    const r = await reserveFor(t.store, a, 5);
    assert.ok(r.outcome.ok);
    // The key's hold is lifted behind the store's back: lifting it again must fail its guard (held >= 5).
    assert.equal(await t.exec('UPDATE api_keys SET held = 0 WHERE id = ?', a.keyId), 1);
    await assert.rejects(t.store.settle({ reservationId: r.id, credits: 3, promptTokens: 1, completionTokens: 1, routedModel: 'm' }),
      /metering guard failed/);
    await assert.rejects(t.store.release(r.id), /metering guard failed/);
    assert.equal((await t.row<{ state: string }>('SELECT state FROM reservations WHERE id = ?', r.id))?.state, 'held');
    assert.equal((await t.row<{ held: number }>('SELECT SUM(held) AS held FROM grants WHERE account_id = ?', a.accountId))?.held, 5);
    assert.equal(await count(t, 'completions', 'reservation_id = ?', r.id), 0);
    assert.equal(await count(t, 'ledger', 'reservation_id = ?', r.id), 0);

    assert.equal(await t.exec('UPDATE api_keys SET held = 5 WHERE id = ?', a.keyId), 1);
    const settled = await t.store.settle({ reservationId: r.id, credits: 3, promptTokens: 1, completionTokens: 1, routedModel: 'm' });
    assert.deepEqual(settled, { charged: 3, shortfall: 0, balanceRemaining: 7 });
    await ledgerAgrees(t.store);
  });
});

describePostgres('PostgreSQL migrations', () => {
  it('run from three instances starting at once: one applies, all open at the latest version', async () => {
    const schema = await emptyPostgresSchema();
    const stores = await Promise.all([1, 2, 3].map(() => PostgresStore.open(schema.url)));
    try {
      assert.deepEqual(await Promise.all(stores.map((s) => s.schemaVersion())), [4, 4, 4]);
      const first = stores[0]!;
      const account = await first.createAccount('one');
      assert.deepEqual((await stores[2]!.getAccount(account.id))?.name, 'one');
      const reserved = await first.reserve(
        { reservationId: newId('res'), accountId: account.id, keyId: 'key_missing', model: 'm', leaseMs: 1000 }, take(1),
      ).catch((err: unknown) => err);
      assert.match(String(reserved), /no api key/);
    } finally {
      for (const s of stores) await s.close();
      await schema.drop();
    }
  });
});
