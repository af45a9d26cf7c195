/**
 * `DATABASE_URL` → a Store: `sqlite:<file>` (the embedded default, one
 * process or one machine) or `postgres://…` / `postgresql://…` (one ledger
 * shared by every instance behind a load balancer). Opening applies the
 * migrations the database lacks.
 */
import { resolve } from 'node:path';
import type { Clock } from '../clock.js';
import { systemClock } from '../clock.js';
import { createPool, migrate } from './postgres/database.js';
import { PostgresStore } from './postgres/store.js';
import { openSqliteDatabase, SqliteStore } from './sqlite/store.js';
import type { ProgressListener, Store } from './types.js';

export const DEFAULT_DATABASE_URL = 'sqlite:./data/gateway.db';

export class DatabaseUrlError extends Error {
  override name = 'DatabaseUrlError';
}

/** `sqlite:./rel.db`, `sqlite:/abs.db` and `sqlite:///abs.db` name files; `postgres://…` a server. */
export function sqlitePath(url: string): string | null {
  if (!url.startsWith('sqlite:')) return null;
  let path = url.slice('sqlite:'.length);
  if (path.startsWith('//')) path = path.slice(2);
  if (path === '') throw new DatabaseUrlError(`DATABASE_URL ${url} names no file`);
  return path === ':memory:' ? path : resolve(path);
}

export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url);
}

/** A malformed URL is refused at once (thrown, not rejected); connecting and migrating are awaited. */
export function openStore(url: string, clock: Clock = systemClock): Promise<Store> {
  const path = sqlitePath(url);
  if (path !== null) return Promise.resolve(SqliteStore.open(path, clock));
  if (isPostgresUrl(url)) return PostgresStore.open(url, clock);
  throw new DatabaseUrlError(`DATABASE_URL must start with sqlite: or postgres://, got '${url}'`);
}

/**
 * Applies the migrations a database lacks (what opening a store does) and
 * answers its schema version; `onProgress(version, latest)` is told as they apply.
 */
export async function migrateDatabase(url: string, onProgress?: ProgressListener): Promise<{ kind: Store['kind']; version: number }> {
  const path = sqlitePath(url);
  if (path !== null) {
    const db = openSqliteDatabase(path, onProgress);
    try {
      const row = db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number };
      return { kind: 'sqlite', version: row.v };
    } finally {
      db.close();
    }
  }
  if (!isPostgresUrl(url)) throw new DatabaseUrlError(`DATABASE_URL must start with sqlite: or postgres://, got '${url}'`);
  const pool = createPool(url, { poolSize: 1 });
  try {
    return { kind: 'postgres', version: await migrate(pool, onProgress) };
  } finally {
    await pool.end();
  }
}
