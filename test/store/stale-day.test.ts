/**
 * A reservation refused while the key's first settlement of the day commits.
 * On PostgreSQL the reserve's locking statement waits for the account's rows,
 * then reads the key as that settlement left it, but not the day's row it
 * inserted: under READ COMMITTED a row inserted after the statement began is
 * not in its snapshot. A hold taken on that read is caught by its SQL guard
 * and retried; a refusal wrote nothing, and answered insufficient_credits where
 * the daily cap was the reason (the ledger simulator found it at step 19,082
 * of a million-operation run).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { utcDay } from '../../src/clock.js';
import { TestClock } from '../support/gateway.js';
import { describePostgres, makeAccount, openTempStore, reserveFor, type TempStore } from '../support/store-fixture.js';

describePostgres('a refusal decided while the day\'s first settlement commits', () => {
  it('names the daily cap when the cap is the reason', async () => {
    const clock = new TestClock('2026-11-21T12:00:00Z');
    const t: TempStore = await openTempStore(clock, 'postgres');
    try {
      const a = await makeAccount(t.store, { purchased: 10, dailyCreditLimit: 50 });
      // Another instance's settle: it holds the account's grants, then writes the day's first row.
      await t.exec('BEGIN');
      await t.exec('SELECT id FROM grants WHERE account_id = ? ORDER BY id FOR UPDATE', a.accountId);
      const pending = reserveFor(t.store, a, 20);
      await waitForLockWait(t);
      await t.exec('INSERT INTO key_days (key_id, day, spent) VALUES (?, ?, 45)', a.keyId, utcDay(clock.now()));
      await t.exec('COMMIT');
      const { outcome } = await pending;
      // 45 settled today leaves 5 of the 50 cap; the 10 credits would not do either, but the cap comes first.
      assert.deepEqual(outcome.ok ? outcome : { ok: outcome.ok, reason: outcome.reason }, { ok: false, reason: 'daily_cap' });
      assert.deepEqual(await t.store.balances(a.accountId), { earned: 0, purchased: 10, earnedExpiresAt: null, reserved: 0 });
    } finally {
      await t.cleanup();
    }
  });
});

/** Until a session of this database waits for a lock (the reserve, blocked on the grants). */
async function waitForLockWait(t: TempStore): Promise<void> {
  for (let attempt = 0; attempt < 500; attempt++) {
    const [row] = await t.rows<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks l
      JOIN pg_stat_activity s ON s.pid = l.pid WHERE NOT l.granted AND s.datname = current_database()`);
    if ((row?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('the reserve never waited for the locked grants');
}
