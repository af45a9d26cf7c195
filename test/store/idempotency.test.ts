/**
 * Idempotency-Key claims, on each backend: a claim lives as long as its reservation,
 * the stored response commits with the settlement, a release frees the key, a
 * sweeper settles what a dead request delivered (and the key is then not run
 * again), and records past 24 h are pruned.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestClock } from '../support/gateway.js';
import { forEachBackend, makeAccount, openTempStore, reserveFor, settleRequest, type TempStore } from '../support/store-fixture.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

forEachBackend('store idempotency', (backend) => {
  let clock: TestClock;
  let t: TempStore;

  beforeEach(async () => {
    clock = new TestClock('2026-11-21T12:00:00Z');
    t = await openTempStore(clock, backend);
  });
  afterEach(async () => {
    await t.cleanup();
  });

  function row(key: string): Promise<{ state: string; reservation_id: string | null; body: string | null } | undefined> {
    return t.row('SELECT state, reservation_id, body FROM idempotency_keys WHERE key = ?', key);
  }

  describe('Idempotency-Key claims', () => {
    it('stays running for as long as its reservation is held, however long that is', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'f'), { state: 'claimed' });
      const r = await reserveFor(t.store, a, 10, { idempotencyKey: 'k', leaseMs: 30_000 });
      assert.equal((await row('k'))?.reservation_id, r.id);
      // A long stream renews its lease: 20 minutes later its claim is still alive (it counted as stale after 15).
      for (let i = 0; i < 40; i++) {
        clock.advance(30_000);
        assert.equal(await t.store.renewLease(r.id, 30_000), true);
      }
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'f'), { state: 'running' });
      // Even a lapsed lease that no sweeper has closed yet is still running: its charge is not decided.
      clock.advance(HOUR);
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'f'), { state: 'running' });
    });

    it('a claim read while its reservation is being linked is running, never stale (other connections)', async () => {
      // Found by running the end-to-end suite on PostgreSQL: a copy whose claim waited on the row
      // lock of the reserving transaction saw the link but not the reservation, judged the claim
      // stale, and ran the request a second time.
      const a = await makeAccount(t.store, { purchased: 10_000 });
      const others = await Promise.all([1, 2, 3].map(() => t.openAnother(clock)));
      for (let round = 0; round < 10; round++) {
        const key = `race-${round}`;
        assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, key, 'f'), { state: 'claimed' });
        const [reserved, ...claims] = await Promise.all([
          reserveFor(t.store, a, 10, { idempotencyKey: key }),
          ...others.flatMap((o) => [o.claimIdempotencyKey(a.accountId, key, 'f'), o.claimIdempotencyKey(a.accountId, key, 'f')]),
        ]);
        assert.equal(reserved.outcome.ok, true);
        assert.deepEqual(claims, claims.map(() => ({ state: 'running' })), `round ${round}`);
        await t.store.release(reserved.id);
      }
    });

    it('stores the response in the settling transaction, built from the settled result', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      await t.store.claimIdempotencyKey(a.accountId, 'k', 'f');
      const r = await reserveFor(t.store, a, 10, { idempotencyKey: 'k' });
      const result = await t.store.settle({ ...settleRequest(r.id, 7), respond: (settled) => ({ status: 200, body: { charged: settled.charged, left: settled.balanceRemaining } }) });
      assert.deepEqual(result, { charged: 7, shortfall: 0, balanceRemaining: 93 });
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'f'), { state: 'done', response: { status: 200, body: { charged: 7, left: 93 } } });
    });

    it('never settles without the response: a response that cannot be built undoes the settlement', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      await t.store.claimIdempotencyKey(a.accountId, 'k', 'f');
      const r = await reserveFor(t.store, a, 10, { idempotencyKey: 'k' });
      await assert.rejects(t.store.settle({ ...settleRequest(r.id, 7), respond: () => { throw new Error('no response'); } }), /no response/);
      const state = await t.row<{ state: string }>('SELECT state FROM reservations WHERE id = ?', r.id);
      assert.equal(state?.state, 'held');
      assert.equal((await row('k'))?.state, 'running');
      assert.equal((await t.store.balances(a.accountId)).purchased, 100);
    });

    it('frees the key when its reservation is released at no charge', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      await t.store.claimIdempotencyKey(a.accountId, 'k', 'f');
      const r = await reserveFor(t.store, a, 10, { idempotencyKey: 'k' });
      await t.store.release(r.id);
      assert.equal(await row('k'), undefined);
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'f'), { state: 'claimed' });
    });

    it('after a crash: a hold that delivered nothing frees the key; one that delivered is settled and not run again', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      await t.store.claimIdempotencyKey(a.accountId, 'quiet', 'f');
      await reserveFor(t.store, a, 10, { idempotencyKey: 'quiet', leaseMs: 1000 });
      await t.store.claimIdempotencyKey(a.accountId, 'spoke', 'f');
      const spoke = await reserveFor(t.store, a, 10, { idempotencyKey: 'spoke', leaseMs: 1000 });
      await t.store.renewLease(spoke.id, 1000, { credits: 4, promptTokens: 12, completionTokens: 30, routedModel: 'm' });
      clock.advance(2000);
      assert.equal(await t.store.releaseExpiredLeases(), 2);
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'quiet', 'f'), { state: 'claimed' });
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'spoke', 'f'), { state: 'interrupted' });
      assert.equal((await t.store.balances(a.accountId)).purchased, 96, 'the delivered 4 credits were charged');
      const completion = await t.row('SELECT credits, prompt_tokens, completion_tokens FROM completions WHERE reservation_id = ?', spoke.id);
      assert.deepEqual(completion, { credits: 4, prompt_tokens: 12, completion_tokens: 30 });
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });

    it('a claim that never reserved is running for a minute, then belongs to a dead process', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      await t.store.claimIdempotencyKey(a.accountId, 'k', 'f');
      clock.advance(30_000);
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'f'), { state: 'running' });
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'other'), { state: 'mismatch' });
      clock.advance(MINUTE);
      assert.deepEqual(await t.store.claimIdempotencyKey(a.accountId, 'k', 'f'), { state: 'claimed' });
    });

    it('abandoning lets go of a claim that never reserved, and of no other', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      await t.store.claimIdempotencyKey(a.accountId, 'k', 'f');
      await reserveFor(t.store, a, 10, { idempotencyKey: 'k' });
      await t.store.abandonIdempotencyKey(a.accountId, 'k');
      assert.equal((await row('k'))?.state, 'running', 'a claim tied to a reservation stays');
      await t.store.claimIdempotencyKey(a.accountId, 'free', 'f');
      await t.store.abandonIdempotencyKey(a.accountId, 'free');
      assert.equal(await row('free'), undefined);
    });

    it('prunes records past 24 hours and keeps younger ones', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      await t.store.claimIdempotencyKey(a.accountId, 'old', 'f');
      const r = await reserveFor(t.store, a, 10, { idempotencyKey: 'old' });
      await t.store.settle({ ...settleRequest(r.id, 1), respond: () => ({ status: 200, body: {} }) });
      clock.advance(23 * HOUR);
      await t.store.claimIdempotencyKey(a.accountId, 'young', 'f');
      clock.advance(2 * HOUR);
      assert.equal(await t.store.pruneIdempotencyKeys(), 1);
      assert.equal(await row('old'), undefined);
      assert.equal((await row('young'))?.state, 'running');
    });
  });

  describe('renewLease records what was delivered', () => {
    it('only ever raises the record, and a sweeper settles it within the hold', async () => {
      const a = await makeAccount(t.store, { purchased: 100 });
      const r = await reserveFor(t.store, a, 10, { leaseMs: 1000 });
      await t.store.renewLease(r.id, 1000, { credits: 6, promptTokens: 10, completionTokens: 50, routedModel: 'm' });
      await t.store.renewLease(r.id, 1000, { credits: 3, promptTokens: 10, completionTokens: 20, routedModel: 'm' });
      clock.advance(2000);
      assert.equal(await t.store.releaseExpiredLeases(), 1);
      const reservation = await t.row('SELECT state, charged FROM reservations WHERE id = ?', r.id);
      assert.deepEqual(reservation, { state: 'settled', charged: 6 });
      assert.deepEqual(await t.store.balances(a.accountId), { earned: 0, purchased: 94, earnedExpiresAt: null, reserved: 0 });
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });
  });
});
