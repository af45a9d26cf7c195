/**
 * The lease keeper: however many requests are in flight, one timer and one
 * store call per interval renew all their leases. The store is a real one,
 * wrapped only to count the calls it gets.
 */
import { afterEach, beforeEach, it } from 'node:test';
import assert from 'node:assert/strict';
import { LeaseKeeper } from '../../src/gateway/lease.js';
import type { LeaseRenewal, Store } from '../../src/store/types.js';
import { forEachBackend, makeAccount, openTempStore, reserveFor, settleRequest, type TempStore } from '../support/store-fixture.js';

const LEASES = 40;
const LEASE_MS = 300;

/** A real store that records every renewLeases call (what it was given and its answer) and counts renewLease calls. */
class CountingStore {
  readonly batches: Array<{ renewals: LeaseRenewal[]; answer: Promise<Set<string>> }> = [];
  singles = 0;
  private waiters: Array<{ count: number; resolve: () => void }> = [];
  readonly store: Store;

  constructor(real: Store) {
    this.store = new Proxy(real, {
      get: (target, prop) => {
        if (prop === 'renewLeases') {
          return (renewals: LeaseRenewal[]) => {
            const answer = target.renewLeases(renewals);
            this.batches.push({ renewals: [...renewals], answer });
            for (const w of this.waiters.filter((x) => this.batches.length >= x.count)) w.resolve();
            return answer;
          };
        }
        if (prop === 'renewLease') this.singles++;
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  }

  /** Resolves once `count` batches in all have been asked for. */
  until(count: number): Promise<void> {
    if (this.batches.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  /** The next batch asked for from now on, and its answer. */
  async next(): Promise<{ renewals: LeaseRenewal[]; held: Set<string> }> {
    const index = this.batches.length;
    await this.until(index + 1);
    const batch = this.batches[index]!;
    return { renewals: batch.renewals, held: await batch.answer };
  }
}

forEachBackend('lease keeper', (backend) => {
  let t: TempStore;
  let keeper: LeaseKeeper | null = null;
  // The keeper's timer is unref'd, as it must be in a server; this keeps the test's loop alive while it waits.
  let alive: NodeJS.Timeout;

  beforeEach(async () => {
    alive = setInterval(() => undefined, 1000);
    t = await openTempStore(undefined, backend);
  });
  afterEach(async () => {
    clearInterval(alive);
    keeper?.close();
    keeper = null;
    await t.cleanup();
  });

  it('renews N concurrent leases with one timer and one store call per interval', { timeout: 30_000 }, async () => {
    const counting = new CountingStore(t.store);
    const errors: unknown[] = [];
    const k = new LeaseKeeper(counting.store, LEASE_MS, (err) => errors.push(err));
    keeper = k;
    const account = await makeAccount(t.store, { purchased: 10_000 });
    const ids: string[] = [];
    for (let i = 0; i < LEASES; i++) ids.push((await reserveFor(t.store, account, 10, { leaseMs: LEASE_MS })).id);

    const realSetInterval = globalThis.setInterval;
    let timers = 0; // setInterval calls while the leases start
    const counted = (...args: Parameters<typeof realSetInterval>) => {
      timers++;
      return realSetInterval(...args);
    };
    globalThis.setInterval = counted as unknown as typeof globalThis.setInterval;
    const leases = (() => {
      try {
        return ids.map((id) => k.start(id));
      } finally {
        globalThis.setInterval = realSetInterval;
      }
    })();
    assert.equal(timers, 1, `${LEASES} leases share one timer`);

    await counting.until(3);
    for (const batch of counting.batches) {
      assert.deepEqual(batch.renewals.map((r) => r.reservationId).sort(), [...ids].sort(), 'each interval renews every lease in one call');
    }
    assert.equal(counting.singles, 0, 'no lease is renewed on its own');
    assert.equal((await counting.batches[0]!.answer).size, LEASES);

    // What a lease reports as delivered reaches the database with the next renewal.
    leases[0]!.track(() => ({ credits: 3, promptTokens: 5, completionTokens: 7, routedModel: 'fake-model' }));
    await counting.next();
    const row = await t.row<{ delivered_credits: number; routed_model: string }>(
      'SELECT delivered_credits, routed_model FROM reservations WHERE id = ?', ids[0]);
    assert.deepEqual({ ...row }, { delivered_credits: 3, routed_model: 'fake-model' });

    // Stopped leases leave the batch.
    for (const lease of leases.slice(30)) lease.stop();
    assert.equal((await counting.next()).renewals.length, 30);

    // Reservations settled behind the keeper's back are dropped once a renewal finds them closed.
    for (const id of ids.slice(25, 30)) await t.store.settle(settleRequest(id, 1));
    let batch = await counting.next();
    while (batch.renewals.length !== 25) batch = await counting.next();
    assert.deepEqual(batch.renewals.map((r) => r.reservationId).sort(), ids.slice(0, 25).sort());
    assert.equal(batch.held.size, 25);
    assert.equal(k.size, 25);
    assert.deepEqual(errors, []);
  });

  it('a lease started after close is not renewed', async () => {
    const k = new LeaseKeeper(t.store, LEASE_MS);
    keeper = k;
    k.close();
    k.start('res_after_close');
    assert.equal(k.size, 0);
  });
});
