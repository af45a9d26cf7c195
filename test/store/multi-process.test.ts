/**
 * True concurrency: four processes, each with its own connection, reserve and
 * settle against one SQLite file for one account that cannot afford them all.
 * Only the database serialises them.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { WorkerMessage, WorkerSettlement } from '../support/reserve-worker.js';
import { makeAccount, openTempSqliteStore, type FixtureAccount, type TempSqliteStore } from '../support/store-fixture.js';

const WORKERS = 4;
const CYCLES = 50;
const PURCHASED = 700;
const EARNED = 300;
const WORKER_SCRIPT = fileURLToPath(new URL('../support/reserve-worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Finished {
  settlements: WorkerSettlement[];
  refusals: number;
  errors: string[];
  exitCode: number | null;
}

function startWorker(dbPath: string, account: FixtureAccount, index: number) {
  const child = fork(WORKER_SCRIPT, [dbPath, account.accountId, account.keyId, String(CYCLES), String(index)], {
    cwd: ROOT, execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let report: Extract<WorkerMessage, { type: 'done' }> | null = null;
  const ready = new Promise<void>((resolve, reject) => {
    child.on('message', (message: WorkerMessage) => {
      if (message.type === 'ready') resolve();
      else report = message;
    });
    child.once('exit', (code) => reject(new Error(`worker ${index} exited with ${code} before it was ready`)));
  });
  const finished = new Promise<Finished>((resolve) => {
    child.once('exit', (exitCode) => resolve({
      settlements: report?.settlements ?? [], refusals: report?.refusals ?? 0, errors: report?.errors ?? [], exitCode,
    }));
  });
  return { child, ready, finished };
}

describe('reserve and settle from several processes on one SQLite file', () => {
  let t: TempSqliteStore;
  let account: FixtureAccount;
  let results: Finished[];
  const children: ChildProcess[] = [];

  before(async () => {
    t = openTempSqliteStore();
    account = await makeAccount(t.store, { purchased: PURCHASED, earned: [{ amount: EARNED, expiresAt: '2099-01-01T00:00:00Z' }] });
    const workers = Array.from({ length: WORKERS }, (_, i) => startWorker(t.path, account, i));
    children.push(...workers.map((w) => w.child));
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.child.send('go');
    results = await Promise.all(workers.map((w) => w.finished));
  });

  after(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
    await t.cleanup();
  });

  const settlements = () => results.flatMap((r) => r.settlements);

  it('every worker finished cleanly', () => {
    assert.deepEqual(results.map((r) => r.exitCode), Array(WORKERS).fill(0));
    assert.deepEqual(results.flatMap((r) => r.errors), []);
    assert.equal(settlements().length + results.reduce((n, r) => n + r.refusals, 0), WORKERS * CYCLES);
  });

  it('the credits covered only part of the work: some reservations were refused', () => {
    const refusals = results.reduce((n, r) => n + r.refusals, 0);
    assert.ok(refusals > 0, 'no refusals');
    assert.ok(settlements().length > 0, 'no successes');
    const asked = settlements().reduce((n, s) => n + (s.asked ?? 0), 0);
    assert.ok(asked > 0);
  });

  it('no balance went negative, and nothing is left held', async () => {
    const raw = t.raw();
    assert.deepEqual(raw.prepare('SELECT COUNT(*) AS n FROM grants WHERE balance < 0 OR held < 0 OR held > balance').get(), { n: 0 });
    assert.deepEqual(raw.prepare(`SELECT COUNT(*) AS n FROM reservations WHERE state = 'held'`).get(), { n: 0 });
    assert.equal((await t.store.balances(account.accountId)).reserved, 0);
  });

  it('the balance dropped by exactly what was charged, and the ledger says the same', async () => {
    const charged = settlements().reduce((n, s) => n + s.charged, 0);
    const b = await t.store.balances(account.accountId);
    assert.equal(PURCHASED + EARNED - (b.earned + b.purchased), charged);

    const raw = t.raw();
    const ledger = raw.prepare(`SELECT -COALESCE(SUM(amount), 0) AS charged, COALESCE(SUM(shortfall), 0) AS shortfall
      FROM ledger WHERE account_id = ? AND entry IN ('charge', 'shortfall')`).get(account.accountId) as { charged: number; shortfall: number };
    assert.equal(ledger.charged, charged);
    assert.equal(ledger.shortfall, settlements().reduce((n, s) => n + s.shortfall, 0));

    const perReservation = new Map((raw.prepare(`SELECT reservation_id AS id, -SUM(amount) AS charged FROM ledger
      WHERE entry = 'charge' GROUP BY reservation_id`).all() as Array<{ id: string; charged: number }>).map((r) => [r.id, r.charged]));
    for (const s of settlements()) assert.equal(perReservation.get(s.reservationId) ?? 0, s.charged, s.reservationId);
    assert.deepEqual(raw.prepare('SELECT COUNT(*) AS n FROM reservations').get(), { n: settlements().length });
  });

  it('each settlement charged what was asked, or recorded the difference as a shortfall', () => {
    for (const s of settlements()) {
      if (s.asked === null) assert.deepEqual([s.charged, s.shortfall], [0, 0]);
      else assert.equal(s.charged + s.shortfall, s.asked, JSON.stringify(s));
    }
  });

  it('the processes really ran side by side: their ledger entries interleave', () => {
    const raw = t.raw();
    const firstSeq = raw.prepare('SELECT MIN(seq) AS seq FROM ledger WHERE reservation_id = ?');
    const spans = results.map((r) => {
      const seqs = r.settlements.map((s) => (firstSeq.get(s.reservationId) as { seq: number | null }).seq).filter((q) => q !== null);
      return seqs.length === 0 ? null : [Math.min(...seqs), Math.max(...seqs)] as const;
    }).filter((span) => span !== null);
    const overlapping = spans.filter((a) => spans.some((b) => a !== b && a[0] < b[1] && b[0] < a[1]));
    assert.ok(overlapping.length >= 2, `ledger spans per process: ${JSON.stringify(spans)}`);
  });

  it('verifyLedger agrees', async () => {
    const report = await t.store.verifyLedger();
    assert.deepEqual(report.disagreements, []);
    assert.equal(report.grants, 2);
  });
});
