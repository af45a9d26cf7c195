/**
 * The store's guards around the money: lease expiry released exactly
 * once across instances, the ledger that balances are checked against, and
 * the constraints that refuse bad writes even from outside the Store.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestClock } from '../support/gateway.js';
import {
  count, forEachBackend, grantState, makeAccount, openTempStore, reserveFor, settleRequest, type TempStore,
} from '../support/store-fixture.js';

const T0 = '2026-11-21T12:00:00Z';
const HOUR = 3_600_000;

forEachBackend('store ledger', (backend) => {
  let clock: TestClock;
  let t: TempStore;

  beforeEach(async () => {
    clock = new TestClock(T0);
    t = await openTempStore(clock, backend);
  });
  afterEach(async () => {
    await t.cleanup();
  });

  describe('leases', () => {
    it('a lapsed reservation is released by releaseExpiredLeases exactly once, a renewed one is not', async () => {
      const a = await makeAccount(t.store, { purchased: 100, dailyCreditLimit: 100 });
      const lapsing = await reserveFor(t.store, a, 20, { leaseMs: 30_000 });
      const renewed = await reserveFor(t.store, a, 10, { leaseMs: 30_000 });
      clock.advance(30_000);
      assert.equal(await t.store.releaseExpiredLeases(), 0, 'not before the lease has passed');
      assert.equal(await t.store.renewLease(renewed.id, 30_000), true);
      clock.advance(1);
      assert.equal(await t.store.releaseExpiredLeases(), 1);
      assert.equal(await t.store.releaseExpiredLeases(), 0);
      assert.equal(await t.store.renewLease(lapsing.id, 30_000), false, 'a released reservation cannot be renewed');
      assert.deepEqual(await t.store.balances(a.accountId), { earned: 0, purchased: 100, earnedExpiresAt: null, reserved: 10 });
      assert.deepEqual(await t.row('SELECT held FROM api_keys WHERE id = ?', a.keyId), { held: 10 });
      // The lapsed request ended after all: it is settled late, from what is free now, within the cap.
      assert.deepEqual(await t.store.settle(settleRequest(lapsing.id, 20)), { charged: 20, shortfall: 0, balanceRemaining: 80 });
      assert.deepEqual(await t.store.settle(settleRequest(lapsing.id, 20)), { charged: 20, shortfall: 0, balanceRemaining: 80 }, 'once');
      assert.deepEqual(await t.store.settle(settleRequest(renewed.id, 10)), { charged: 10, shortfall: 0, balanceRemaining: 70 });
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });

    it('two Store instances on one database release each lapsed reservation once between them', async () => {
      const other = await t.openAnother();
      const a = await makeAccount(t.store, { purchased: 100, earned: [{ amount: 30, expiresAt: '2026-12-01T00:00:00Z' }] });
      for (const amount of [5, 10, 15, 20]) await reserveFor(t.store, a, amount, { leaseMs: 1000 });
      await reserveFor(other, a, 7, { leaseMs: 60_000 });
      clock.advance(1001);
      const counts = await Promise.all([other.releaseExpiredLeases(), t.store.releaseExpiredLeases()]);
      // SQLite sweeps in one transaction, so one instance closes all four; PostgreSQL's share them out.
      assert.equal(counts[0]! + counts[1]!, 4, String(counts));
      assert.deepEqual(await Promise.all([other.releaseExpiredLeases(), t.store.releaseExpiredLeases()]), [0, 0]);
      assert.deepEqual(await t.store.balances(a.accountId), {
        earned: 30, purchased: 100, earnedExpiresAt: new Date('2026-12-01T00:00:00Z'), reserved: 7,
      });
      assert.deepEqual((await other.verifyLedger()).disagreements, []);
    });
  });

  describe('ledger', () => {
    async function mixedWorkload() {
      const a = await makeAccount(t.store, {
        purchased: 200, earned: [{ amount: 40, expiresAt: '2026-11-21T14:00:00Z' }, { amount: 25, expiresAt: '2026-12-01T00:00:00Z' }],
        dailyCreditLimit: 150,
      });
      const b = await makeAccount(t.store, { purchased: 60 });
      const r1 = await reserveFor(t.store, a, 30);
      await t.store.settle(settleRequest(r1.id, 22));
      const r2 = await reserveFor(t.store, a, 20);
      await t.store.release(r2.id);
      const r3 = await reserveFor(t.store, a, 25, { leaseMs: 1000 });
      const r4 = await reserveFor(t.store, a, 10);
      clock.advance(3 * HOUR); // the first earned grant expires while r4 holds on it
      await t.store.releaseExpiredLeases();
      await t.store.settle(settleRequest(r4.id, 14));
      const r5 = await reserveFor(t.store, b, 50);
      const r6 = await reserveFor(t.store, b, 10);
      await t.store.settle(settleRequest(r5.id, 70));
      await t.store.settle(settleRequest(r6.id, 3));
      await t.store.settle(settleRequest(r1.id, 99));
      await reserveFor(t.store, a, 12); // left in flight
      return { a, b, released: r3 };
    }

    it('verifyLedger agrees with the balances after a mixed workload', async () => {
      const { a } = await mixedWorkload();
      const report = await t.store.verifyLedger();
      assert.deepEqual(report.disagreements, []);
      assert.equal(report.accounts, 2);
      assert.equal(report.grants, 4);
      assert.equal(await count(t, 'ledger'), report.entries);
      assert.equal(await count(t, 'grants', 'balance < 0 OR held > balance'), 0);
      const balances = await t.store.balances(a.accountId);
      const ledgerTotal = await t.row<{ s: number }>('SELECT SUM(amount) AS s FROM ledger WHERE account_id = ?', a.accountId);
      assert.equal(balances.earned + balances.purchased, ledgerTotal?.s);
    });

    it('verifyLedger reports a balance, a hold or a charge changed behind its back', async () => {
      const { a, b } = await mixedWorkload();
      const before = await grantState(t, a.purchasedGrant!);
      await t.exec('UPDATE grants SET balance = balance + 7 WHERE id = ?', a.purchasedGrant);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, [
        { accountId: a.accountId, subject: a.purchasedGrant, field: 'balance', stored: before.balance + 7, recomputed: before.balance },
      ]);
      await t.exec('UPDATE grants SET balance = balance - 7 WHERE id = ?', a.purchasedGrant);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);

      await t.exec('UPDATE grants SET held = held + 1 WHERE id = ?', b.purchasedGrant);
      const held = (await t.store.verifyLedger()).disagreements;
      assert.deepEqual(held.map((d) => [d.subject, d.field, d.stored - d.recomputed]), [[b.purchasedGrant, 'held', 1]]);
      await t.exec('UPDATE grants SET held = held - 1 WHERE id = ?', b.purchasedGrant);

      const settled = (await t.row<{ id: string; charged: number }>(
        `SELECT id, charged FROM reservations WHERE account_id = ? AND state = 'settled' LIMIT 1`, b.accountId))!;
      await t.exec('UPDATE reservations SET charged = charged + 2 WHERE id = ?', settled.id);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, [
        { accountId: b.accountId, subject: settled.id, field: 'charged', stored: settled.charged + 2, recomputed: settled.charged },
      ]);
    });

    it('refuses UPDATE and DELETE of its entries', async () => {
      await mixedWorkload();
      const entries = await count(t, 'ledger');
      await assert.rejects(t.exec('UPDATE ledger SET amount = 0'), /append-only/);
      await assert.rejects(t.exec('UPDATE ledger SET amount = amount WHERE seq = 1'), /append-only/);
      await assert.rejects(t.exec('DELETE FROM ledger WHERE seq = 1'), /append-only/);
      await assert.rejects(t.exec('DELETE FROM ledger'), /append-only/);
      if (backend === 'postgres') {
        await assert.rejects(t.exec('DELETE FROM ledger WHERE seq = -1'), /append-only/, 'even a statement that matches nothing');
        await assert.rejects(t.exec('TRUNCATE ledger CASCADE'), /append-only/);
      }
      assert.equal(await count(t, 'ledger'), entries);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });
  });

  describe('CHECK constraints', () => {
    it('refuse a negative balance, a negative hold, or a hold over the balance written directly', async () => {
      const a = await makeAccount(t.store, { purchased: 10 });
      await reserveFor(t.store, a, 4);
      const id = a.purchasedGrant!;
      await assert.rejects(t.exec('UPDATE grants SET balance = -1, held = 0 WHERE id = ?', id), /check constraint/i);
      await assert.rejects(t.exec('UPDATE grants SET balance = 3 WHERE id = ?', id), /check constraint/i);
      await assert.rejects(t.exec('UPDATE grants SET held = 11 WHERE id = ?', id), /check constraint/i);
      await assert.rejects(t.exec('UPDATE grants SET held = -1 WHERE id = ?', id), /check constraint/i);
      await assert.rejects(t.exec('UPDATE api_keys SET held = -1'), /check constraint/i);
      await assert.rejects(t.exec('INSERT INTO key_days (key_id, day, spent) SELECT id, \'2026-01-01\', -1 FROM api_keys'), /check constraint/i);
      assert.deepEqual(await grantState(t, id), { id, kind: 'purchased', balance: 10, held: 4 });
    });

    it('roll back a reservation whose planner asks for more than is free', async () => {
      const a = await makeAccount(t.store, { purchased: 10 });
      const lying = { reservationId: 'res_lying', accountId: a.accountId, keyId: a.keyId, model: 'svc-fast', leaseMs: 1000 };
      await assert.rejects(t.store.reserve(lying, () => ({ ok: true, amount: 11, maxOutput: 1 })));
      assert.deepEqual(await grantState(t, a.purchasedGrant!), { id: a.purchasedGrant, kind: 'purchased', balance: 10, held: 0 });
      assert.equal(await count(t, 'reservations'), 0);
      assert.equal(await count(t, 'reservation_holds'), 0);
    });
  });
});
