/**
 * Two instances settle the same reservation at once (a retried settle racing
 * the first, or a late settle racing a sweeper's): one charges, the other
 * answers what was charged, and both report the balance the charge left.
 * The ledger simulator found the second answer stale on PostgreSQL: its
 * statement had waited for the first settle's locks, but read the grants as
 * they were before it.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, it } from 'node:test';
import type { Store } from '../../src/store/types.js';
import { forEachBackend, makeAccount, openTempStore, reserveFor, settleRequest, type TempStore } from '../support/store-fixture.js';

forEachBackend('a settle raced by a copy of itself on another instance', (backend) => {
  let t: TempStore;
  let other: Store;
  beforeEach(async () => {
    t = await openTempStore(undefined, backend);
    other = await t.openAnother();
  });
  afterEach(async () => {
    await other.close();
    await t.cleanup();
  });

  it('charges once, and both answers give the balance after that charge', async () => {
    for (let round = 0; round < 20; round++) {
      const account = await makeAccount(t.store, { purchased: 180 });
      const { id, outcome } = await reserveFor(t.store, account, 30);
      assert.ok(outcome.ok);
      const [a, b] = await Promise.all([t.store.settle(settleRequest(id, 2)), other.settle(settleRequest(id, 2))]);
      assert.deepEqual([a.charged, b.charged], [2, 2]);
      const balances = await t.store.balances(account.accountId);
      assert.equal(balances.purchased, 178, 'charged once');
      assert.deepEqual([a.balanceRemaining, b.balanceRemaining], [178, 178], `round ${round}`);
    }
  });
});
