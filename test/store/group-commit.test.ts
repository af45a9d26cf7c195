/**
 * SQLite's group commit: writes that arrive together share one transaction,
 * each in a savepoint, and each caller hears back only after the COMMIT that
 * holds its change. A refused or failing write undoes nobody else's; a process
 * killed with SIGKILL in the middle of a batch leaves every answered settle on
 * the ledger, and nothing half-done.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { makeAccount, openTempSqliteStore, reserveFor, settleRequest, take } from '../support/store-fixture.js';

describe('SQLite group commit', () => {
  it('commits a batch in which some reservations are refused and one write throws, undoing only those', async () => {
    const t = openTempSqliteStore();
    try {
      const account = await makeAccount(t.store, { purchased: 100 });
      // 30 reservations of 10 in one turn of the event loop, and a settle of a reservation that does not exist.
      const reserves = Array.from({ length: 30 }, () => reserveFor(t.store, account, 10));
      const bogus = t.store.settle(settleRequest('res_missing', 5));
      const [outcomes, bogusOutcome] = await Promise.all([Promise.all(reserves), bogus.then(() => 'settled', (e: unknown) => String(e))]);
      assert.match(bogusOutcome, /no reservation res_missing/);
      const granted = outcomes.filter((o) => o.outcome.ok);
      assert.equal(granted.length, 10, 'exactly what 100 credits afford');
      assert.equal((await t.store.balances(account.accountId)).reserved, 100);
      // Every granted one is durable and settles; the refused ones left nothing behind.
      const held = t.raw().prepare("SELECT COUNT(*) AS n FROM reservations WHERE state = 'held'").get() as { n: number };
      assert.equal(held.n, 10);
      await Promise.all(granted.map((g) => t.store.settle(settleRequest(g.id, 4))));
      const balances = await t.store.balances(account.accountId);
      assert.deepEqual([balances.purchased, balances.reserved], [60, 0]);
      assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
    } finally {
      await t.cleanup();
    }
  });

  it('answers a write only after its commit: a second connection sees it the moment the promise resolves', async () => {
    const t = openTempSqliteStore();
    try {
      const account = await makeAccount(t.store, { purchased: 1000 });
      const seen = await Promise.all(Array.from({ length: 20 }, async () => {
        const { id, outcome } = await reserveFor(t.store, account, 5);
        assert.ok(outcome.ok);
        // Another connection reads only committed data.
        return t.raw().prepare('SELECT state FROM reservations WHERE id = ?').get(id) as { state: string } | undefined;
      }));
      assert.deepEqual(seen.map((r) => r?.state), Array(20).fill('held'));
    } finally {
      await t.cleanup();
    }
  });

  it('closes only after the writes already asked for have committed', async () => {
    const t = openTempSqliteStore();
    try {
      const account = await makeAccount(t.store, { purchased: 1000 });
      const pending = Array.from({ length: 12 }, () => reserveFor(t.store, account, 5));
      await t.store.close();
      assert.equal((await Promise.all(pending)).filter((p) => p.outcome.ok).length, 12);
      const reopened = SqliteStore.open(t.path);
      assert.equal((await reopened.balances(account.accountId)).reserved, 60);
      await reopened.close();
    } finally {
      await t.cleanup();
    }
  });

  for (const round of [1, 2, 3]) {
    it(`keeps every answered settle when the process is killed with SIGKILL mid-batch (round ${round})`, async () => {
      const t = openTempSqliteStore();
      try {
        const account = await makeAccount(t.store, { purchased: 10_000_000 });
        await t.store.close();
        const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/group-commit-worker.ts', t.path, account.accountId, account.keyId, '24'],
          { stdio: ['ignore', 'pipe', 'inherit'] });
        const answered = new Map<string, number>();
        const killAt = 150 + round * 97;
        await new Promise<void>((resolve, reject) => {
          child.once('exit', () => resolve());
          child.once('error', reject);
          createInterface({ input: child.stdout! }).on('line', (line) => {
            const [word, id, charged] = line.split(' ');
            if (word === 'settled' && id) answered.set(id, Number(charged));
            if (answered.size === killAt) child.kill('SIGKILL');
          });
        });
        assert.equal(child.signalCode, 'SIGKILL');
        assert.ok(answered.size >= killAt, `${answered.size} settles answered before the kill`);

        const reopened = SqliteStore.open(t.path);
        try {
          const rows = t.raw().prepare("SELECT r.id, r.state, c.credits FROM reservations r LEFT JOIN completions c ON c.reservation_id = r.id").all() as
            Array<{ id: string; state: string; credits: number | null }>;
          const byId = new Map(rows.map((r) => [r.id, r]));
          for (const [id, charged] of answered) {
            const row = byId.get(id);
            assert.ok(row, `answered settle ${id} is on disk`);
            assert.equal(row.state, 'settled');
            assert.equal(row.credits, charged);
          }
          const report = await reopened.verifyLedger();
          assert.deepEqual(report.disagreements, []);
          // Reservations caught in flight are held (to be swept after their lease) or settled whole; none half-settled.
          const settledCharges = rows.filter((r) => r.state === 'settled').reduce((sum, r) => sum + (r.credits ?? 0), 0);
          const balances = await reopened.balances(account.accountId);
          assert.equal(balances.purchased, 10_000_000 - settledCharges);
          assert.equal(balances.reserved, rows.filter((r) => r.state === 'held').length * 10);
        } finally {
          await reopened.close();
        }
      } finally {
        await t.cleanup();
      }
    });
  }

  it('lets a refused planner in the batch see the funds the earlier writes of the same batch left', async () => {
    const t = openTempSqliteStore();
    try {
      const account = await makeAccount(t.store, { purchased: 25 });
      const seen: number[] = [];
      const results = await Promise.all(Array.from({ length: 4 }, () => t.store.reserve(
        { reservationId: `res_${Math.random().toString(36).slice(2)}`, accountId: account.accountId, keyId: account.keyId, model: 'svc-fast', leaseMs: 30_000 },
        (funds) => { seen.push(funds.available); return take(10)(funds); },
      )));
      assert.deepEqual(results.map((r) => r.ok), [true, true, false, false]);
      assert.deepEqual(seen, [25, 15, 5, 5]);
    } finally {
      await t.cleanup();
    }
  });
});
