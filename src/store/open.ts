/** `DATABASE_URL` → a Store. SQLite is the embedded default; PostgreSQL joins next. */
import { resolve } from 'node:path';
import type { Clock } from '../clock.js';
import { systemClock } from '../clock.js';
import { SqliteStore } from './sqlite/store.js';
import type { Store } from './types.js';

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

export function openStore(url: string, clock: Clock = systemClock): Store {
  const path = sqlitePath(url);
  if (path !== null) return SqliteStore.open(path, clock);
  if (/^postgres(ql)?:\/\//.test(url)) {
    throw new DatabaseUrlError('PostgreSQL storage is not in this version yet; use sqlite:<file> for now.');
  }
  throw new DatabaseUrlError(`DATABASE_URL must start with sqlite: or postgres://, got '${url}'`);
}
