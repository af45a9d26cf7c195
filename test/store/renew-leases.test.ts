/**
 * renewLeases: every lease of a process renewed in one call, one statement,
 * with what each request delivered; closed reservations are left alone.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { TestClock } from '../support/gateway.js';
import { forEachBackend, makeAccount, openTempStore, reserveFor, settleRequest, type TempStore } from '../support/store-fixture.js';
import type { LeaseRenewal } from '../../src/store/types.js';

const T0 = '2026-11-21T12:00:00Z';

interface LeaseRow {
  state: string;
  lease_until: number;
  delivered_credits: number;
  delivered_prompt_tokens: number;
  delivered_completion_tokens: number;
  routed_model: string | null;
}

forEachBackend('store renewLeases', (backend) => {
  let clock: TestClock;
  let t: TempStore;

  beforeEach(async () => {
    clock = new TestClock(T0);
    t = await openTempStore(clock, backend);
  });
  afterEach(async () => {
    await t.cleanup();
  });

  const leaseOf = async (id: string) => (await t.row<LeaseRow>(
    `SELECT state, lease_until, delivered_credits, delivered_prompt_tokens, delivered_completion_tokens, routed_model
     FROM reservations WHERE id = ?`, id))!;

  describe('many leases in one call', () => {
    it('renews the held ones, skips settled, released and unknown ones, and answers which were renewed', async () => {
      const a = await makeAccount(t.store, { purchased: 1000 });
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push((await reserveFor(t.store, a, 10, { leaseMs: 1000 })).id);
      const settled = ids.slice(0, 3);
      const released = ids.slice(3, 5);
      for (const id of settled) await t.store.settle(settleRequest(id, 7));
      for (const id of released) await t.store.release(id);
      const before = await leaseOf(settled[0]!);

      clock.advance(500);
      const renewals: LeaseRenewal[] = [...ids, 'res_unknown'].map((reservationId) => ({ reservationId, leaseMs: 60_000 }));
      const renewed = await t.store.renewLeases(renewals);

      const held = ids.slice(5);
      assert.deepEqual([...renewed].sort(), [...held].sort());
      const leaseUntil = new Date(T0).getTime() + 500 + 60_000;
      for (const id of held) assert.equal((await leaseOf(id)).lease_until, leaseUntil);
      assert.deepEqual(await leaseOf(settled[0]!), before, 'a settled reservation is not touched');
      assert.equal((await leaseOf(released[0]!)).state, 'released');
      assert.equal((await t.row<{ n: number }>(`SELECT COUNT(*) AS n FROM reservations WHERE state = 'held'`))?.n, 15);
    });

    it('records what each one delivered, never lowering it, and keeps the routed model when nothing new is given', async () => {
      const a = await makeAccount(t.store, { purchased: 1000 });
      const [r1, r2, r3] = [
        (await reserveFor(t.store, a, 10, { leaseMs: 1000 })).id,
        (await reserveFor(t.store, a, 10, { leaseMs: 1000 })).id,
        (await reserveFor(t.store, a, 10, { leaseMs: 1000 })).id,
      ] as [string, string, string];
      await t.store.renewLease(r2, 1000, { credits: 5, promptTokens: 10, completionTokens: 40, routedModel: 'model-a' });

      const renewed = await t.store.renewLeases([
        { reservationId: r1, leaseMs: 1000, delivered: { credits: 4, promptTokens: 10, completionTokens: 30, routedModel: 'model-b' } },
        { reservationId: r2, leaseMs: 1000, delivered: { credits: 2, promptTokens: 10, completionTokens: 10, routedModel: 'model-c' } },
        { reservationId: r3, leaseMs: 1000, delivered: null },
      ]);
      assert.equal(renewed.size, 3);
      const leaseUntil = new Date(T0).getTime() + 1000;
      assert.deepEqual(await leaseOf(r1), {
        state: 'held', lease_until: leaseUntil, delivered_credits: 4, delivered_prompt_tokens: 10, delivered_completion_tokens: 30, routed_model: 'model-b',
      });
      assert.deepEqual(await leaseOf(r2), {
        state: 'held', lease_until: leaseUntil, delivered_credits: 5, delivered_prompt_tokens: 10, delivered_completion_tokens: 40, routed_model: 'model-c',
      }, 'what was delivered only grows');
      assert.deepEqual(await leaseOf(r3), {
        state: 'held', lease_until: leaseUntil, delivered_credits: 0, delivered_prompt_tokens: 0, delivered_completion_tokens: 0, routed_model: null,
      });

      // Nothing new delivered: the record and the routed model stay.
      await t.store.renewLeases([{ reservationId: r1, leaseMs: 1000 }]);
      assert.equal((await leaseOf(r1)).routed_model, 'model-b');
      assert.equal((await leaseOf(r1)).delivered_credits, 4);

      // A sweeper settles each for what it recorded as delivered, and lets go of the one that delivered nothing.
      clock.advance(2000);
      assert.equal(await t.store.releaseExpiredLeases(), 3);
      const charged = async (id: string) => (await t.row<{ state: string; charged: number }>('SELECT state, charged FROM reservations WHERE id = ?', id))!;
      assert.deepEqual(await charged(r1), { state: 'settled', charged: 4 });
      assert.deepEqual(await charged(r2), { state: 'settled', charged: 5 });
      assert.deepEqual(await charged(r3), { state: 'lapsed', charged: 0 });
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    });

    it('renews nothing when given nothing', async () => {
      assert.equal((await t.store.renewLeases([])).size, 0);
    });
  });
});
