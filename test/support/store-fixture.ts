/**
 * A Store on a throwaway database, for tests that drive it directly, on either
 * backend: SQLite on a temp file, or PostgreSQL in a schema of its own inside a
 * database that this test process creates (`svc_test_<random>`) and drops at
 * the end. PostgreSQL runs only when SVC_TEST_POSTGRES_URL names a server
 * (e.g. postgres://postgres@127.0.0.1:5432/postgres); `forEachBackend` then
 * registers each suite once per backend. Also: accounts with grants and a key,
 * fixed-amount planners, and a second connection to read (or tamper with) the
 * tables behind the Store's back.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import type { Database } from 'better-sqlite3';
import { Client, escapeIdentifier } from 'pg';
import type { Clock } from '../../src/clock.js';
import { issueApiKey } from '../../src/keys/issue.js';
import { newId } from '../../src/ids.js';
import { numericTypes, type PoolOptions } from '../../src/store/postgres/database.js';
import { PostgresStore } from '../../src/store/postgres/store.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Funds, ReservationPlanner, ReserveOutcome, Store } from '../../src/store/types.js';

export type Backend = 'sqlite' | 'postgres';

export const POSTGRES_URL_VARIABLE = 'SVC_TEST_POSTGRES_URL';

export interface TempStore {
  backend: Backend;
  store: Store;
  /** What another instance would open: `sqlite:<file>`, or the PostgreSQL database and schema. */
  url: string;
  /** Rows from a second connection; `?` placeholders on both backends. */
  rows<T>(sql: string, ...params: unknown[]): Promise<T[]>;
  /** The first row, or undefined. */
  row<T>(sql: string, ...params: unknown[]): Promise<T | undefined>;
  /** Runs a statement on the second connection; answers how many rows it changed. */
  exec(sql: string, ...params: unknown[]): Promise<number>;
  /** Another Store on the same database (another instance or process would do the same). */
  openAnother(clock?: Clock, options?: PoolOptions): Promise<Store>;
  cleanup(): Promise<void>;
}

/** Registers `body`'s suite once per backend; PostgreSQL's is skipped, visibly, without SVC_TEST_POSTGRES_URL. */
export function forEachBackend(name: string, body: (backend: Backend) => void): void {
  describe(`${name} [sqlite]`, () => body('sqlite'));
  if (!postgresServerUrl()) {
    noticeSkipped();
    describe.skip(`${name} [postgres] (skipped: set ${POSTGRES_URL_VARIABLE} to run it)`, () => body('postgres'));
    return;
  }
  describe(`${name} [postgres]`, () => {
    after(dropTestDatabase);
    body('postgres');
  });
}

/** Registers a PostgreSQL-only suite, skipped visibly without SVC_TEST_POSTGRES_URL. */
export function describePostgres(name: string, body: () => void): void {
  if (!postgresServerUrl()) {
    noticeSkipped();
    describe.skip(`${name} [postgres] (skipped: set ${POSTGRES_URL_VARIABLE} to run it)`, body);
    return;
  }
  describe(`${name} [postgres]`, () => {
    after(dropTestDatabase);
    body();
  });
}

export async function openTempStore(clock?: Clock, backend: Backend = 'sqlite', options: PoolOptions = {}): Promise<TempStore> {
  return backend === 'sqlite' ? sqliteTemp(openTempSqliteStore(clock)) : postgresTemp(await emptyPostgresSchema(), clock, options);
}

export interface TempSqliteStore {
  store: SqliteStore;
  path: string;
  /** A second connection, opened on first use. */
  raw(): Database;
  openAnother(clock?: Clock): SqliteStore;
  cleanup(): Promise<void>;
}

/** SQLite only, for tests of SQLite itself (its write lock, processes sharing its file). */
export function openTempSqliteStore(clock?: Clock): TempSqliteStore {
  const dir = mkdtempSync(join(tmpdir(), 'svc-store-test-'));
  const path = join(dir, 'gateway.db');
  const store = SqliteStore.open(path, clock);
  const others: SqliteStore[] = [];
  let raw: Database | null = null;
  return {
    store,
    path,
    raw() {
      raw ??= new BetterSqlite3(path);
      return raw;
    },
    openAnother(otherClock = clock) {
      const other = SqliteStore.open(path, otherClock);
      others.push(other);
      return other;
    },
    async cleanup() {
      raw?.close();
      for (const other of others) await other.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function sqliteTemp(t: TempSqliteStore): TempStore {
  return {
    backend: 'sqlite',
    store: t.store,
    url: `sqlite:${t.path}`,
    async rows<T>(sql: string, ...params: unknown[]) {
      return t.raw().prepare(sql).all(...params) as T[];
    },
    async row<T>(sql: string, ...params: unknown[]) {
      return t.raw().prepare(sql).get(...params) as T | undefined;
    },
    async exec(sql: string, ...params: unknown[]) {
      return t.raw().prepare(sql).run(...params).changes;
    },
    async openAnother(clock?: Clock) {
      return t.openAnother(clock);
    },
    cleanup: () => t.cleanup(),
  };
}

async function postgresTemp(schema: PostgresSchema, clock: Clock | undefined, options: PoolOptions): Promise<TempStore> {
  const store = await PostgresStore.open(schema.url, clock, options);
  const others: Store[] = [];
  let raw: Client | null = null;
  const query = async (sql: string, params: unknown[]) => {
    if (!raw) {
      raw = new Client({ connectionString: schema.url, types: numericTypes() });
      await raw.connect();
    }
    let n = 0;
    return raw.query(sql.replace(/\?/g, () => `$${++n}`), params);
  };
  return {
    backend: 'postgres',
    store,
    url: schema.url,
    async rows<T>(sql: string, ...params: unknown[]) {
      return (await query(sql, params)).rows as T[];
    },
    async row<T>(sql: string, ...params: unknown[]) {
      return (await query(sql, params)).rows[0] as T | undefined;
    },
    async exec(sql: string, ...params: unknown[]) {
      return (await query(sql, params)).rowCount ?? 0;
    },
    async openAnother(otherClock = clock, otherOptions: PoolOptions = {}) {
      const other = await PostgresStore.open(schema.url, otherClock, otherOptions);
      others.push(other);
      return other;
    },
    async cleanup() {
      await (raw as Client | null)?.end();
      for (const other of others) await other.close();
      await store.close();
      await schema.drop();
    },
  };
}

export interface PostgresSchema {
  /** The test database, with this schema first on the search path. */
  url: string;
  drop(): Promise<void>;
}

export function postgresServerUrl(): string | undefined {
  return process.env[POSTGRES_URL_VARIABLE] || undefined;
}

let noticed = false;
function noticeSkipped(): void {
  if (noticed) return;
  noticed = true;
  console.log(`PostgreSQL store tests skipped: set ${POSTGRES_URL_VARIABLE} (e.g. postgres://postgres@127.0.0.1:5432/postgres) to run them.`);
}

let testDatabase: Promise<string> | null = null;

/** This process's own database, created on first use. */
function testDatabaseUrl(): Promise<string> {
  testDatabase ??= (async () => {
    const server = postgresServerUrl();
    if (!server) throw new Error(`${POSTGRES_URL_VARIABLE} is not set`);
    const name = `svc_test_${randomBytes(6).toString('hex')}`;
    await onServer(server, (c) => c.query(`CREATE DATABASE ${escapeIdentifier(name)}`));
    const url = new URL(server);
    url.pathname = `/${name}`;
    return url.toString();
  })();
  return testDatabase;
}

/** Drops this process's test database, if one was made. */
export async function dropTestDatabase(): Promise<void> {
  if (!testDatabase) return;
  const url = new URL(await testDatabase);
  testDatabase = null;
  const server = postgresServerUrl()!;
  await onServer(server, (c) => c.query(`DROP DATABASE IF EXISTS ${escapeIdentifier(url.pathname.slice(1))} WITH (FORCE)`));
}

/** A new, empty schema in this process's test database: every Store opened on its URL migrates it from nothing. */
export async function emptyPostgresSchema(): Promise<PostgresSchema> {
  const database = await testDatabaseUrl();
  const schema = `s_${randomBytes(6).toString('hex')}`;
  await onServer(database, (c) => c.query(`CREATE SCHEMA ${schema}`));
  const url = new URL(database);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    drop: () => onServer(database, (c) => c.query(`DROP SCHEMA ${schema} CASCADE`)).then(() => undefined),
  };
}

async function onServer<T>(url: string, run: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

export interface AccountSpec {
  purchased?: number;
  earned?: Array<{ amount: number; expiresAt: Date | string }>;
  dailyCreditLimit?: number | null;
  rateLimitRpm?: number | null;
}

export interface FixtureAccount {
  accountId: string;
  keyId: string;
  purchasedGrant: string | null;
  earnedGrants: string[];
}

/** Purchased credits are granted first, so they are the oldest grant. */
export async function makeAccount(store: Store, spec: AccountSpec): Promise<FixtureAccount> {
  const account = await store.createAccount(null);
  const purchased = spec.purchased ? await store.grant(account.id, 'purchased', spec.purchased, null) : null;
  const earned: string[] = [];
  for (const e of spec.earned ?? []) earned.push((await store.grant(account.id, 'earned', e.amount, new Date(e.expiresAt))).id);
  const { record } = await issueApiKey(store, account.id, {
    daily_credit_limit: spec.dailyCreditLimit ?? null, rate_limit_rpm: spec.rateLimitRpm ?? null,
  });
  return { accountId: account.id, keyId: record.id, purchasedGrant: purchased?.id ?? null, earnedGrants: earned };
}

/** A planner that asks for exactly `amount` credits, refusing as the policy does (cap first). */
export function take(amount: number, seen?: Funds[]): ReservationPlanner {
  return (funds) => {
    seen?.push(funds);
    if (funds.capRemaining !== null && amount > funds.capRemaining) return { ok: false, reason: 'daily_cap', message: 'cap' };
    if (amount > funds.available) return { ok: false, reason: 'insufficient_credits', message: 'credits' };
    return { ok: true, amount, maxOutput: amount };
  };
}

/** Reserves `amount` for the account's key; the reservation id is returned with the outcome. */
export async function reserveFor(
  store: Store, account: FixtureAccount, amount: number,
  options: { leaseMs?: number; seen?: Funds[]; idempotencyKey?: string; keyId?: string } = {},
): Promise<{ id: string; outcome: ReserveOutcome }> {
  const id = newId('res');
  const outcome = await store.reserve(
    {
      reservationId: id, accountId: account.accountId, keyId: options.keyId ?? account.keyId, model: 'svc-fast',
      leaseMs: options.leaseMs ?? 30_000,
      ...(options.idempotencyKey !== undefined && { idempotencyKey: options.idempotencyKey }),
    },
    take(amount, options.seen),
  );
  return { id, outcome };
}

export function settleRequest(reservationId: string, credits: number) {
  return { reservationId, credits, promptTokens: 10, completionTokens: 20, routedModel: 'fake-model' };
}

export interface GrantState {
  id: string;
  kind: string;
  balance: number;
  held: number;
}

export async function grantState(t: TempStore, grantId: string): Promise<GrantState> {
  const grant = await t.row<GrantState>('SELECT id, kind, balance, held FROM grants WHERE id = ?', grantId);
  if (!grant) throw new Error(`no grant ${grantId}`);
  return grant;
}

export interface LedgerRow {
  grant_id: string | null;
  entry: string;
  amount: number;
  reservation_id: string | null;
  shortfall: number;
}

export async function ledgerRows(t: TempStore, where: { accountId?: string; reservationId?: string; grantId?: string }): Promise<LedgerRow[]> {
  const clauses: string[] = [];
  const params: string[] = [];
  if (where.accountId) { clauses.push('account_id = ?'); params.push(where.accountId); }
  if (where.reservationId) { clauses.push('reservation_id = ?'); params.push(where.reservationId); }
  if (where.grantId) { clauses.push('grant_id = ?'); params.push(where.grantId); }
  return t.rows<LedgerRow>(`SELECT grant_id, entry, amount, reservation_id, shortfall FROM ledger
    WHERE ${clauses.join(' AND ') || '1 = 1'} ORDER BY seq`, ...params);
}

/** A reservation's holds, in the spending order they were taken in. */
export async function holdsOf(t: TempStore, reservationId: string): Promise<Array<{ grant_id: string; amount: number }>> {
  return t.rows(`SELECT h.grant_id, h.amount FROM reservation_holds h JOIN grants g ON g.id = h.grant_id
    WHERE h.reservation_id = ? ORDER BY (g.kind = 'purchased'), g.expires_at, g.created_at, g.id`, reservationId);
}

export async function count(t: TempStore, table: string, where = '1 = 1', ...params: unknown[]): Promise<number> {
  return (await t.row<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where}`, ...params))?.n ?? 0;
}
