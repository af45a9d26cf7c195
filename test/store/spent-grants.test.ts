/**
 * Spent grants (balance 0) stay in the table, since the ledger points at them,
 * but out of metering: migration 4 indexes the live ones (`grants_live`) and
 * the earned ones with free credits (`grants_lapsing`), and every read of an
 * account's grants says `balance > 0`. Before it, each reserve, settle and
 * balances() read every grant the account ever had: the simulator's accounts,
 * with thousands each, ran 5 times slower after 100,000 operations.
 * A database at version 3 (there are some in the wild) migrates and keeps its money.
 */
import { afterEach, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import BetterSqlite3 from 'better-sqlite3';
import type { Database } from 'better-sqlite3';
import { Client } from 'pg';
import { numericTypes } from '../../src/store/postgres/database.js';
import { MIGRATIONS as POSTGRES_MIGRATIONS } from '../../src/store/postgres/schema.js';
import { PostgresStore } from '../../src/store/postgres/store.js';
import { SqliteMetering } from '../../src/store/sqlite/metering.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/store/sqlite/schema.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { TestClock } from '../support/gateway.js';
import {
  describePostgres, emptyPostgresSchema, forEachBackend, makeAccount, openTempSqliteStore, openTempStore,
  reserveFor, settleRequest, type TempStore,
} from '../support/store-fixture.js';

const T0 = '2026-11-21T12:00:00Z';
const DAY = 86_400_000;

forEachBackend('spent grants', (backend) => {
  let clock: TestClock;
  let t: TempStore;

  beforeEach(async () => {
    clock = new TestClock(T0);
    t = await openTempStore(clock, backend);
  });
  afterEach(async () => {
    await t.cleanup();
  });

  it('are left out of balances, reserve, settle and the sweep, while a hold on an expired grant still counts', async () => {
    const a = await makeAccount(t.store, {});
    // Twenty one-credit grants spent to zero, one settle each.
    for (let i = 0; i < 20; i++) {
      await t.store.grant(a.accountId, 'earned', 1, new Date(clock.now().getTime() + DAY));
      const r = await reserveFor(t.store, a, 1);
      assert.equal(r.outcome.ok, true);
      assert.deepEqual(await t.store.settle(settleRequest(r.id, 1)), { charged: 1, shortfall: 0, balanceRemaining: 0 });
    }
    const soon = await t.store.grant(a.accountId, 'earned', 10, new Date(clock.now().getTime() + 1000));
    await t.store.grant(a.accountId, 'purchased', 50, null);
    const held = await reserveFor(t.store, a, 4);
    assert.deepEqual(await t.store.balances(a.accountId), {
      earned: 10, purchased: 50, earnedExpiresAt: new Date(clock.now().getTime() + 1000), reserved: 4,
    });

    // Past its expiry the earned grant keeps only what is held on it; the sweep writes that down once.
    clock.advance(1001);
    assert.deepEqual(await t.store.balances(a.accountId), { earned: 4, purchased: 50, earnedExpiresAt: null, reserved: 4 });
    await t.store.releaseExpiredLeases();
    const [grant] = await t.rows<{ balance: number; held: number }>('SELECT balance, held FROM grants WHERE id = ?', soon.id);
    assert.deepEqual(grant, { balance: 4, held: 4 });
    // The hold on the expired grant is settled from; the rest comes from the purchase.
    assert.deepEqual(await t.store.settle(settleRequest(held.id, 6)), { charged: 6, shortfall: 0, balanceRemaining: 48 });
    assert.deepEqual(await t.store.balances(a.accountId), { earned: 0, purchased: 48, earnedExpiresAt: null, reserved: 0 });
    const [counts] = await t.rows<{ spent: number; live: number }>(`SELECT
      SUM(CASE WHEN balance = 0 THEN 1 ELSE 0 END) AS spent, SUM(CASE WHEN balance > 0 THEN 1 ELSE 0 END) AS live
      FROM grants WHERE account_id = ?`, a.accountId);
    assert.deepEqual(counts, { spent: 21, live: 1 });
    assert.deepEqual((await t.store.verifyLedger()).disagreements, []);
  });
});

describe('spent grants [sqlite]: the metering statements', () => {
  it('read an account\'s grants only through grants_live, grants_lapsing or their primary key, never a scan', async () => {
    const t = openTempSqliteStore();
    try {
      const db = t.raw();
      const prepared: string[] = [];
      const recording = new Proxy(db, {
        get(target, property) {
          if (property === 'prepare') return (sql: string) => { prepared.push(sql); return target.prepare(sql); };
          const value: unknown = Reflect.get(target, property);
          return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
        },
      });
      new SqliteMetering(recording, new TestClock(T0));
      const reading = prepared.filter((sql) => /\bgrants\b/.test(sql));
      assert.ok(reading.length >= 8, `${reading.length} statements read grants`);
      for (const sql of reading) {
        const plan = explain(db, sql);
        const scans = plan.filter((line) => /^SCAN (g|grants)\b/.test(line));
        assert.deepEqual(scans, [], `${sql}\n${plan.join('\n')}`);
        assert.ok(!plan.some((line) => line.includes('grants_by_account')), 'the old index is gone');
      }
    } finally {
      await t.cleanup();
    }
  });
});

/** EXPLAIN QUERY PLAN of `sql`, every parameter bound to null. */
function explain(db: Database, sql: string): string[] {
  const named = [...new Set([...sql.matchAll(/@(\w+)/g)].map((m) => m[1]!))];
  const statement = db.prepare(`EXPLAIN QUERY PLAN ${sql}`);
  const rows = named.length > 0
    ? statement.all(Object.fromEntries(named.map((n) => [n, null])))
    : statement.all(...Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => null));
  return (rows as Array<{ detail: string }>).map((r) => r.detail);
}

/** Version 3's tables with one account: two grants spent to zero, one live purchase and one live earned grant. */
const VERSION_3_ROWS = [
  `INSERT INTO accounts (id, name, created_at) VALUES ('acc_old', 'old', 1)`,
  `INSERT INTO grants (id, account_id, kind, amount, balance, held, expires_at, created_at) VALUES
    ('gr_1', 'acc_old', 'earned', 5, 0, 0, 4102444800000, 1), ('gr_2', 'acc_old', 'purchased', 7, 0, 0, NULL, 2),
    ('gr_3', 'acc_old', 'purchased', 30, 30, 0, NULL, 3), ('gr_4', 'acc_old', 'earned', 9, 9, 0, 4102444800000, 4)`,
  `INSERT INTO ledger (account_id, grant_id, entry, amount, created_at) VALUES
    ('acc_old', 'gr_1', 'grant', 5, 1), ('acc_old', 'gr_1', 'charge', -5, 2), ('acc_old', 'gr_2', 'grant', 7, 2),
    ('acc_old', 'gr_2', 'charge', -7, 3), ('acc_old', 'gr_3', 'grant', 30, 3), ('acc_old', 'gr_4', 'grant', 9, 4)`,
];
const OLD_BALANCES = { earned: 9, purchased: 30, earnedExpiresAt: new Date(4102444800000), reserved: 0 };

describe('migration 4 [sqlite]', () => {
  it('opens a version-3 file at version 4 with its balances and ledger unchanged', async () => {
    const t = openTempSqliteStore();
    const path = `${t.path}.v3`;
    const old = new BetterSqlite3(path);
    old.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)');
    SQLITE_MIGRATIONS.slice(0, 3).forEach((sql, i) => {
      old.exec(sql);
      old.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, 1)').run(i + 1);
    });
    for (const sql of VERSION_3_ROWS) old.exec(sql);
    old.close();
    const store = SqliteStore.open(path, new TestClock(T0));
    try {
      const db = new BetterSqlite3(path, { readonly: true });
      const version = db.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number };
      const indexes = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'grants'`).all() as Array<{ name: string }>)
        .map((r) => r.name).filter((n) => !n.startsWith('sqlite_')).sort();
      db.close();
      assert.equal(version.v, 4);
      assert.deepEqual(indexes, ['grants_lapsing', 'grants_live']);
      assert.deepEqual(await store.balances('acc_old'), OLD_BALANCES);
      assert.deepEqual((await store.verifyLedger()).disagreements, []);
    } finally {
      await store.close();
      await t.cleanup();
    }
  });
});

describePostgres('migration 4', () => {
  it('opens a version-3 schema at version 4 with its balances and ledger unchanged', async () => {
    const schema = await emptyPostgresSchema();
    const old = new Client({ connectionString: schema.url, types: numericTypes() });
    await old.connect();
    let store: PostgresStore | null = null;
    try {
      await old.query('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)');
      for (const [i, sql] of POSTGRES_MIGRATIONS.slice(0, 3).entries()) {
        await old.query(sql);
        await old.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 1)', [i + 1]);
      }
      for (const sql of VERSION_3_ROWS) await old.query(sql);
      store = await PostgresStore.open(schema.url, new TestClock(T0));
      assert.equal(await store.schemaVersion(), 4);
      const { rows } = await old.query<{ indexname: string }>(
        `SELECT indexname FROM pg_indexes WHERE tablename = 'grants' AND schemaname = current_schema() AND indexname <> 'grants_pkey' ORDER BY 1`);
      assert.deepEqual(rows.map((r) => r.indexname), ['grants_lapsing', 'grants_live']);
      assert.deepEqual(await store.balances('acc_old'), OLD_BALANCES);
      assert.deepEqual((await store.verifyLedger()).disagreements, []);
    } finally {
      await store?.close();
      await old.end();
      await schema.drop();
    }
  });
});
