/**
 * Another process (here: another connection) holding SQLite's write lock must
 * not freeze the gateway: the write waits for it without blocking the event
 * loop, then goes through.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { makeAccount, openTempSqliteStore, reserveFor } from '../support/store-fixture.js';

describe('a write lock held elsewhere', () => {
  it('is waited for asynchronously: timers keep firing, and the reservation lands once the lock is gone', { timeout: 30_000 }, async () => {
    const t = openTempSqliteStore();
    const other = new BetterSqlite3(t.path);
    try {
      const account = await makeAccount(t.store, { purchased: 100 });
      other.exec('BEGIN IMMEDIATE');
      let ticks = 0;
      const ticker = setInterval(() => ticks++, 5);
      const released = new Promise<void>((resolve) => setTimeout(() => {
        other.exec('COMMIT');
        resolve();
      }, 300));
      const reserved = await reserveFor(t.store, account, 10);
      clearInterval(ticker);
      await released;
      assert.equal(reserved.outcome.ok, true);
      assert.ok(ticks >= 10, `the event loop ran while waiting (${ticks} ticks)`);
      assert.equal((await t.store.balances(account.accountId)).reserved, 10);
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await t.cleanup();
    }
  });
});
