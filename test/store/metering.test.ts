/**
 * Reserve, settle, release, earned-credit expiry and the daily cap, on each
 * backend: the same expectations, to the ledger entry, for SQLite and PostgreSQL.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Funds } from '../../src/store/types.js';
import { TestClock } from '../support/gateway.js';
import {
  count, forEachBackend, grantState, holdsOf, ledgerRows, makeAccount, openTempStore, reserveFor, settleRequest, type TempStore,
} from '../support/store-fixture.js';

const T0 = '2026-11-21T12:00:00Z';
const HOUR = 3_600_000;

function sum(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

forEachBackend('store metering', (backend) => {
  let clock: TestClock;
  let t: TempStore;

  beforeEach(async () => {
    clock = new TestClock(T0);
    t = await openTempStore(clock, backend);
  });
  afterEach(async () => {
    await t.cleanup();
  });

  describe('reserve', () => {
    it('holds earned credits first, soonest expiry first, then purchased', async () => {
      const a = await makeAccount(t.store, {
        purchased: 100,
        earned: [{ amount: 10, expiresAt: '2026-11-23T00:00:00Z' }, { amount: 5, expiresAt: '2026-11-22T00:00:00Z' }],
      });
      const [later, sooner] = a.earnedGrants;
      const seen: Funds[] = [];
      const r = await reserveFor(t.store, a, 20, { seen });
      assert.deepEqual(r.outcome, { ok: true, amount: 20, maxOutput: 20 });
      assert.deepEqual(seen, [{ available: 115, capRemaining: null }]);
      assert.deepEqual(await holdsOf(t, r.id), [
        { grant_id: sooner, amount: 5 }, { grant_id: later, amount: 10 }, { grant_id: a.purchasedGrant, amount: 5 },
      ]);
      assert.deepEqual(await grantState(t, a.purchasedGrant!), { id: a.purchasedGrant, kind: 'purchased', balance: 100, held: 5 });
      assert.deepEqual(await t.store.balances(a.accountId), {
        earned: 15, purchased: 100, earnedExpiresAt: new Date('2026-11-22T00:00:00Z'), reserved: 20,
      });
      assert.deepEqual(await ledgerRows(t, { reservationId: r.id }), [], 'a hold is not a ledger entry');
    });

    it('sees only what other holds leave, and refuses what it cannot hold', async () => {
      const a = await makeAccount(t.store, { purchased: 30 });
      await reserveFor(t.store, a, 25);
      const seen: Funds[] = [];
      const r = await reserveFor(t.store, a, 6, { seen });
      assert.deepEqual(seen, [{ available: 5, capRemaining: null }]);
      assert.equal(r.outcome.ok, false);
      assert.deepEqual(await holdsOf(t, r.id), []);
      assert.deepEqual(await count(t, 'reservations'), 1);
    });
  });

  describe('settle', () => {
    it('charges the exact amount in spending order, releases the rest, and writes charge entries', async () => {
      const a = await makeAccount(t.store, {
        purchased: 100,
        earned: [{ amount: 10, expiresAt: '2026-11-23T00:00:00Z' }, { amount: 5, expiresAt: '2026-11-22T00:00:00Z' }],
      });
      const [later, sooner] = a.earnedGrants;
      const r = await reserveFor(t.store, a, 20);
      const result = await t.store.settle(settleRequest(r.id, 12));
      assert.deepEqual(result, { charged: 12, shortfall: 0, balanceRemaining: 103 });
      assert.deepEqual(await ledgerRows(t, { reservationId: r.id }), [
        { grant_id: sooner, entry: 'charge', amount: -5, reservation_id: r.id, shortfall: 0 },
        { grant_id: later, entry: 'charge', amount: -7, reservation_id: r.id, shortfall: 0 },
      ]);
      assert.deepEqual((await grantState(t, a.purchasedGrant!)).held, 0);
      assert.deepEqual(await t.store.balances(a.accountId), {
        earned: 3, purchased: 100, earnedExpiresAt: new Date('2026-11-23T00:00:00Z'), reserved: 0,
      });
      const usage = await t.store.usage({ accountId: a.accountId, from: new Date('2026-11-21T00:00:00Z'), until: new Date('2026-11-22T00:00:00Z') });
      assert.deepEqual(usage, [{ date: '2026-11-21', model: 'svc-fast', requests: 1, promptTokens: 10, completionTokens: 20, credits: 12 }]);
    });

    it('takes what the upstream counted beyond the reservation from free credits', async () => {
      const a = await makeAccount(t.store, { purchased: 30 });
      const r = await reserveFor(t.store, a, 10);
      assert.deepEqual(await t.store.settle(settleRequest(r.id, 25)), { charged: 25, shortfall: 0, balanceRemaining: 5 });
      assert.equal(sum((await ledgerRows(t, { reservationId: r.id })).map((e) => e.amount)), -25);
      assert.deepEqual(await grantState(t, a.purchasedGrant!), { id: a.purchasedGrant, kind: 'purchased', balance: 5, held: 0 });
    });

    it('never takes credits held by others: the rest is a recorded shortfall, the balance never below 0', async () => {
      const a = await makeAccount(t.store, { purchased: 30 });
      const first = await reserveFor(t.store, a, 10);
      const second = await reserveFor(t.store, a, 15);
      // 10 held + 5 free; the 15 held by `second` stay untouched.
      assert.deepEqual(await t.store.settle(settleRequest(first.id, 40)), { charged: 15, shortfall: 25, balanceRemaining: 15 });
      const entries = await ledgerRows(t, { reservationId: first.id });
      assert.equal(sum(entries.map((e) => e.amount)), -15);
      assert.equal(sum(entries.map((e) => e.shortfall)), 25);
      assert.deepEqual(await grantState(t, a.purchasedGrant!), { id: a.purchasedGrant, kind: 'purchased', balance: 15, held: 15 });
      assert.deepEqual(await t.store.settle(settleRequest(second.id, 15)), { charged: 15, shortfall: 0, balanceRemaining: 0 });
      const third = await reserveFor(t.store, a, 1);
      assert.deepEqual(third.outcome, { ok: false, reason: 'insufficient_credits', message: 'credits' });
      assert.deepEqual((await grantState(t, a.purchasedGrant!)).balance, 0);
    });

    it('charges in spending order at settlement: earned credits freed since the reservation go first', async () => {
      const a = await makeAccount(t.store, { purchased: 100, earned: [{ amount: 10, expiresAt: '2026-12-01T00:00:00Z' }] });
      const earned = a.earnedGrants[0]!;
      const big = await reserveFor(t.store, a, 10); // every earned credit is held…
      const small = await reserveFor(t.store, a, 5); // …so this one holds purchased ones
      assert.deepEqual(await holdsOf(t, small.id), [{ grant_id: a.purchasedGrant, amount: 5 }]);
      await t.store.settle(settleRequest(big.id, 2)); // frees 8 earned credits
      assert.deepEqual(await t.store.settle(settleRequest(small.id, 5)), { charged: 5, shortfall: 0, balanceRemaining: 103 });
      assert.deepEqual((await ledgerRows(t, { reservationId: small.id })).map((e) => [e.grant_id, e.amount]), [[earned, -5]]);
      assert.deepEqual(await t.store.balances(a.accountId), {
        earned: 3, purchased: 100, earnedExpiresAt: new Date('2026-12-01T00:00:00Z'), reserved: 0,
      });
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });

    it('records a shortfall with no grant when nothing at all can be charged', async () => {
      const a = await makeAccount(t.store, { purchased: 10 });
      await reserveFor(t.store, a, 10);
      const empty = await reserveFor(t.store, a, 0);
      assert.equal(empty.outcome.ok, true);
      assert.deepEqual(await t.store.settle(settleRequest(empty.id, 3)), { charged: 0, shortfall: 3, balanceRemaining: 10 });
      assert.deepEqual(await ledgerRows(t, { reservationId: empty.id }), [
        { grant_id: null, entry: 'shortfall', amount: 0, reservation_id: empty.id, shortfall: 3 },
      ]);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });

    it('never takes a key over its daily cap, even beyond the reservation', async () => {
      const a = await makeAccount(t.store, { purchased: 100, dailyCreditLimit: 10 });
      const first = await reserveFor(t.store, a, 5);
      const second = await reserveFor(t.store, a, 5);
      // The cap leaves room for first's own 5 only: second still holds the other 5.
      assert.deepEqual(await t.store.settle(settleRequest(first.id, 8)), { charged: 5, shortfall: 3, balanceRemaining: 95 });
      assert.deepEqual(await t.store.settle(settleRequest(second.id, 9)), { charged: 5, shortfall: 4, balanceRemaining: 90 });
      assert.equal((await t.store.findApiKey(a.keyId))!.creditsSpentToday, 10);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });

    it('is idempotent: a second settle charges nothing more', async () => {
      const a = await makeAccount(t.store, { purchased: 50 });
      const r = await reserveFor(t.store, a, 20);
      assert.deepEqual(await t.store.settle(settleRequest(r.id, 12)), { charged: 12, shortfall: 0, balanceRemaining: 38 });
      assert.deepEqual(await t.store.settle(settleRequest(r.id, 12)), { charged: 12, shortfall: 0, balanceRemaining: 38 });
      assert.deepEqual(await t.store.settle(settleRequest(r.id, 30)), { charged: 12, shortfall: 0, balanceRemaining: 38 });
      assert.equal((await ledgerRows(t, { reservationId: r.id })).length, 1);
      assert.equal((await grantState(t, a.purchasedGrant!)).balance, 38);
      assert.equal((await t.store.findApiKey(a.keyId))!.creditsSpentToday, 12);
      assert.deepEqual(await count(t, 'completions'), 1);
    });

    it('refuses an unknown reservation', async () => {
      await assert.rejects(t.store.settle(settleRequest('res_unknown', 1)), /no reservation/);
    });
  });

  describe('release', () => {
    it('returns every held credit and the cap, at no charge, once', async () => {
      const a = await makeAccount(t.store, { purchased: 50, earned: [{ amount: 20, expiresAt: '2026-12-01T00:00:00Z' }], dailyCreditLimit: 40 });
      const before = await t.store.balances(a.accountId);
      const r = await reserveFor(t.store, a, 30);
      await t.store.release(r.id);
      assert.deepEqual(await t.store.balances(a.accountId), before);
      assert.equal(before.reserved, 0);
      assert.deepEqual(await grantState(t, a.earnedGrants[0]!), { id: a.earnedGrants[0], kind: 'earned', balance: 20, held: 0 });
      assert.deepEqual(await ledgerRows(t, { reservationId: r.id }), []);
      assert.deepEqual(await t.row('SELECT held FROM api_keys WHERE id = ?', a.keyId), { held: 0 });

      await t.store.release(r.id);
      assert.deepEqual(await t.store.settle(settleRequest(r.id, 10)), { charged: 0, shortfall: 0, balanceRemaining: 70 });
      assert.deepEqual(await ledgerRows(t, { reservationId: r.id }), []);
      const seen: Funds[] = [];
      await reserveFor(t.store, a, 40, { seen });
      assert.deepEqual(seen, [{ available: 70, capRemaining: 40 }]);
    });
  });

  describe('earned credits expire', () => {
    it('are gone at expires_at, and the expiry is written to the ledger', async () => {
      const a = await makeAccount(t.store, { purchased: 50, earned: [{ amount: 10, expiresAt: '2026-11-21T13:00:00Z' }] });
      const earned = a.earnedGrants[0]!;
      clock.advance(HOUR);
      assert.deepEqual(await t.store.balances(a.accountId), { earned: 0, purchased: 50, earnedExpiresAt: null, reserved: 0 });
      await t.store.releaseExpiredLeases();
      assert.deepEqual((await ledgerRows(t, { grantId: earned })).map((e) => [e.entry, e.amount]), [['grant', 10], ['expire', -10]]);
      assert.deepEqual(await grantState(t, earned), { id: earned, kind: 'earned', balance: 0, held: 0 });

      const seen: Funds[] = [];
      const r = await reserveFor(t.store, a, 10, { seen });
      assert.deepEqual(seen, [{ available: 50, capRemaining: null }]);
      assert.deepEqual(await holdsOf(t, r.id), [{ grant_id: a.purchasedGrant, amount: 10 }]);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });

    it('are expired by the next reservation when no sweeper ran', async () => {
      const a = await makeAccount(t.store, { purchased: 50, earned: [{ amount: 10, expiresAt: '2026-11-21T13:00:00Z' }] });
      clock.advance(2 * HOUR);
      await reserveFor(t.store, a, 1);
      assert.deepEqual((await ledgerRows(t, { grantId: a.earnedGrants[0]! })).map((e) => [e.entry, e.amount]), [['grant', 10], ['expire', -10]]);
    });

    it('held before expiry can still be settled from; the rest expires', async () => {
      const a = await makeAccount(t.store, { purchased: 50, earned: [{ amount: 10, expiresAt: '2026-11-21T13:00:00Z' }] });
      const earned = a.earnedGrants[0]!;
      const early = await reserveFor(t.store, a, 8);
      assert.deepEqual(await holdsOf(t, early.id), [{ grant_id: earned, amount: 8 }]);
      clock.advance(2 * HOUR);
      assert.deepEqual(await t.store.balances(a.accountId), { earned: 8, purchased: 50, earnedExpiresAt: null, reserved: 8 });

      const seen: Funds[] = [];
      const late = await reserveFor(t.store, a, 5, { seen });
      assert.deepEqual(seen, [{ available: 50, capRemaining: null }]);
      assert.deepEqual(await holdsOf(t, late.id), [{ grant_id: a.purchasedGrant, amount: 5 }]);
      assert.deepEqual(await grantState(t, earned), { id: earned, kind: 'earned', balance: 8, held: 8 });

      assert.deepEqual(await t.store.settle(settleRequest(early.id, 6)), { charged: 6, shortfall: 0, balanceRemaining: 50 });
      assert.deepEqual((await ledgerRows(t, { reservationId: early.id })).map((e) => [e.grant_id, e.amount]), [[earned, -6]]);
      assert.deepEqual((await ledgerRows(t, { grantId: earned })).map((e) => [e.entry, e.amount]),
        [['grant', 10], ['expire', -2], ['charge', -6], ['expire', -2]]);
      assert.deepEqual(await grantState(t, earned), { id: earned, kind: 'earned', balance: 0, held: 0 });
      assert.deepEqual(await t.store.settle(settleRequest(late.id, 5)), { charged: 5, shortfall: 0, balanceRemaining: 45 });
      assert.deepEqual(await t.store.balances(a.accountId), { earned: 0, purchased: 45, earnedExpiresAt: null, reserved: 0 });
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });
    it('beyond a hold on an expired grant, the extra comes from unexpired credits only', async () => {
      const a = await makeAccount(t.store, { purchased: 50, earned: [{ amount: 10, expiresAt: '2026-11-21T13:00:00Z' }] });
      const earned = a.earnedGrants[0]!;
      const r = await reserveFor(t.store, a, 4);
      clock.advance(2 * HOUR); // nothing has written the expiry yet: the grant still shows balance 10
      assert.deepEqual(await t.store.settle(settleRequest(r.id, 7)), { charged: 7, shortfall: 0, balanceRemaining: 47 });
      assert.deepEqual((await ledgerRows(t, { reservationId: r.id })).map((e) => [e.grant_id, e.amount]), [[earned, -4], [a.purchasedGrant, -3]]);
      assert.deepEqual((await ledgerRows(t, { grantId: earned })).map((e) => [e.entry, e.amount]), [['grant', 10], ['charge', -4], ['expire', -6]]);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });
  });

  describe('daily cap', () => {
    it('counts settled plus held credits, and starts afresh on the next UTC day', async () => {
      const a = await makeAccount(t.store, { purchased: 1000, dailyCreditLimit: 30 });
      const first = await reserveFor(t.store, a, 10);
      await t.store.settle(settleRequest(first.id, 10));
      const held = await reserveFor(t.store, a, 15);
      assert.equal(held.outcome.ok, true);

      const seen: Funds[] = [];
      const refused = await reserveFor(t.store, a, 6, { seen });
      assert.deepEqual(seen, [{ available: 975, capRemaining: 5 }]);
      assert.deepEqual(refused.outcome, { ok: false, reason: 'daily_cap', message: 'cap' });
      assert.equal((await reserveFor(t.store, a, 5)).outcome.ok, true);
      assert.equal((await t.store.findApiKey(a.keyId))!.creditsSpentToday, 10);

      clock.set('2026-11-21T23:59:59.999Z');
      assert.equal((await reserveFor(t.store, a, 1)).outcome.ok, false);
      clock.set('2026-11-22T00:00:00Z');
      // A new day: nothing settled yet, but yesterday's 20 credits still in flight count against it.
      const nextDay: Funds[] = [];
      assert.equal((await reserveFor(t.store, a, 11, { seen: nextDay })).outcome.ok, false);
      assert.deepEqual(nextDay, [{ available: 970, capRemaining: 10 }]);
      const fresh = await reserveFor(t.store, a, 10);
      assert.equal(fresh.outcome.ok, true);
      assert.equal((await t.store.findApiKey(a.keyId))!.creditsSpentToday, 0);
      // Yesterday's hold settles today, and counts today: the day still ends within its cap.
      await t.store.settle(settleRequest(held.id, 15));
      await t.store.settle(settleRequest(fresh.id, 10));
      assert.equal((await t.store.findApiKey(a.keyId))!.creditsSpentToday, 25);
      assert.deepEqual(await t.rows('SELECT day, spent FROM key_days WHERE key_id = ? ORDER BY day', a.keyId), [
        { day: '2026-11-21', spent: 10 }, { day: '2026-11-22', spent: 25 },
      ]);
      assert.deepEqual(await t.row('SELECT held FROM api_keys WHERE id = ?', a.keyId), { held: 5 });
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });
  });
});
