/**
 * The stores under simulation: K Store objects ("instances") opened on one
 * fresh database (SQLite: a new temp file; PostgreSQL: a new schema in the
 * database DATABASE_URL names), plus a second, plain connection that reads the
 * tables behind the stores' back and, to force a wait and a retry, holds the
 * database's write lock (SQLite) or an account's rows (PostgreSQL) for a moment.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Database, Statement } from 'better-sqlite3';
import { Client, Pool } from 'pg';
import type { Clock } from '../src/clock.js';
import { numericTypes } from '../src/store/postgres/database.js';
import { openStore } from '../src/store/open.js';
import type { Store } from '../src/store/types.js';

export type Backend = 'sqlite' | 'postgres';

export interface Target {
  backend: Backend;
  /** What `openStore` takes to open one more instance (a child process does). */
  url: string;
  stores: Store[];
  rows<T>(sql: string, ...params: unknown[]): Promise<T[]>;
  /** Runs `op` while another connection holds what it needs for `ms`; it must wait (and retry), then succeed. */
  contend<T>(ms: number, accountId: string, op: () => Promise<T>): Promise<T>;
  /**
   * What a server does on its own between operations: on PostgreSQL, VACUUM and ANALYZE
   * (autovacuum may be off, as on this project's CI machine: a long run then reads ever
   * more dead rows, with statistics from its first minute); nothing on SQLite.
   */
  maintain(): Promise<void>;
  /** Closes and reopens instance `i` (as a restarted process would). */
  reopen(i: number): Promise<void>;
  close(): Promise<void>;
}

export interface TargetOptions {
  backend: Backend;
  instances: number;
  clock: Clock;
  /** PostgreSQL server URL; a fresh schema is made in its database. */
  postgresUrl?: string;
  /** Where the SQLite file goes (default: the system's temp directory). */
  sqliteDir?: string;
  /** Wraps each instance (tests inject a broken store this way). */
  wrap?: (store: Store) => Store;
}

export async function openTarget(options: TargetOptions): Promise<Target> {
  const base = options.backend === 'sqlite' ? sqliteBase(options.sqliteDir) : await postgresBase(options.postgresUrl);
  const open = async () => {
    const store = await openStore(base.url, options.clock);
    return options.wrap ? options.wrap(store) : store;
  };
  const stores: Store[] = [];
  for (let i = 0; i < options.instances; i++) stores.push(await open());
  return {
    backend: options.backend,
    url: base.url,
    stores,
    rows: base.rows,
    contend: base.contend,
    maintain: base.maintain,
    async reopen(i) {
      await stores[i]?.close();
      stores[i] = await open();
    },
    async close() {
      for (const s of stores) await s.close();
      await base.close();
    },
  };
}

interface Base {
  url: string;
  rows<T>(sql: string, ...params: unknown[]): Promise<T[]>;
  contend<T>(ms: number, accountId: string, op: () => Promise<T>): Promise<T>;
  maintain(): Promise<void>;
  close(): Promise<void>;
}

function sqliteBase(parent = tmpdir()): Base {
  const dir = mkdtempSync(join(parent, 'svc-sim-'));
  const path = join(dir, 'sim.db');
  let raw: Database | null = null;
  const db = () => (raw ??= new BetterSqlite3(path));
  const statements = new Map<string, Statement>();
  const statement = (sql: string) => {
    let s = statements.get(sql);
    if (!s) statements.set(sql, (s = db().prepare(sql)));
    return s;
  };
  return {
    url: `sqlite:${path}`,
    async rows<T>(sql: string, ...params: unknown[]) {
      return statement(sql).all(...params) as T[];
    },
    async contend<T>(ms: number, _accountId: string, op: () => Promise<T>) {
      db().prepare('BEGIN IMMEDIATE').run();
      const unlock = setTimeout(() => db().prepare('COMMIT').run(), ms);
      try {
        return await op();
      } finally {
        clearTimeout(unlock);
        if (db().inTransaction) db().prepare('COMMIT').run();
      }
    },
    async maintain() {},
    async close() {
      raw?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresBase(server: string | undefined): Promise<Base> {
  if (!server) throw new Error('the PostgreSQL simulation needs DATABASE_URL (e.g. postgres://postgres@127.0.0.1:5432/postgres)');
  const schema = `sim_${randomBytes(6).toString('hex')}`;
  const admin = new Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const url = new URL(server);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const connect = async () => {
    const c = new Client({ connectionString: url.toString(), types: numericTypes() });
    await c.connect();
    return c;
  };
  // Several connections, so that a snapshot's reads go at once.
  const raw = new Pool({ connectionString: url.toString(), types: numericTypes(), max: 8 });
  const locker = await connect();
  const numbered = (sql: string) => {
    let n = 0;
    return sql.replace(/\?/g, () => `$${++n}`);
  };
  return {
    url: url.toString(),
    async rows<T>(sql: string, ...params: unknown[]) {
      return (await raw.query(numbered(sql), params)).rows as T[];
    },
    async contend<T>(ms: number, accountId: string, op: () => Promise<T>) {
      await locker.query('BEGIN');
      await locker.query('SELECT id FROM grants WHERE account_id = $1 ORDER BY id FOR UPDATE', [accountId]);
      await locker.query('SELECT id FROM api_keys WHERE account_id = $1 ORDER BY id FOR UPDATE', [accountId]);
      const unlock = new Promise<void>((resolve) => setTimeout(resolve, ms)).then(() => locker.query('COMMIT'));
      try {
        return await op();
      } finally {
        await unlock;
      }
    },
    async maintain() {
      // This run's tables only (a bare VACUUM would do every schema of the database).
      const { rows } = await raw.query<{ name: string }>(`SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = current_schema()`);
      if (rows.length > 0) await raw.query(`VACUUM (ANALYZE) ${rows.map((r) => r.name).join(', ')}`);
    },
    async close() {
      await raw.end();
      await locker.end();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.end();
    },
  };
}
