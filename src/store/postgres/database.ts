/**
 * The PostgreSQL connection pool, its transactions and its migrations.
 *
 * Transactions run at READ COMMITTED with explicit row locks, not SERIALIZABLE:
 * every money-moving transaction first locks the rows it will change, always in
 * one order (see metering.ts), so it computes on rows nobody else can change
 * until it commits, and its guards (`UPDATE … WHERE available >= x`, the CHECK
 * constraints) hold regardless. Conflicting transactions wait on a row lock
 * instead of failing at commit, which under the contention of one busy account
 * costs far fewer aborted attempts than SERIALIZABLE would. A serialization
 * failure (40001) or a deadlock (40P01) should not happen with that order, but
 * is retried all the same, a bounded number of times with jittered backoff; no
 * other error is retried, and a transaction whose COMMIT was lost with its
 * connection is never run twice.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { escapeLiteral, Pool, TypeOverrides } from 'pg';
import type { PoolClient, QueryResult, QueryResultRow } from 'pg';
import { MIGRATIONS } from './schema.js';
import type { ProgressListener } from '../types.js';

const INT8_OID = 20;
const NUMERIC_OID = 1700;
const MAX_ATTEMPTS = 5;
const BACKOFF_BASE_MS = 4;
const BACKOFF_MAX_MS = 200;
/** Held by whichever instance migrates, for the length of its migration transaction. */
const MIGRATION_LOCK = 0x7376_6367; // 'svcg'
const RETRYABLE = new Set(['40001', '40P01']);

export interface PoolOptions {
  /** Connections at most; default 10. */
  poolSize?: number;
}

/**
 * BIGINT (credits, epoch ms, counts) and NUMERIC (what SUM of a BIGINT gives)
 * arrive as JavaScript numbers, exact up to 2^53: no balance or time comes near.
 * Set on this pool only, never on pg's global parsers.
 */
export function numericTypes(): TypeOverrides {
  const types = new TypeOverrides();
  types.setTypeParser(INT8_OID, (text: string) => Number(text));
  types.setTypeParser(NUMERIC_OID, (text: string) => Number(text));
  return types;
}

export function createPool(url: string, options: PoolOptions = {}): Pool {
  const pool = new Pool({
    connectionString: url,
    max: options.poolSize ?? 10,
    types: numericTypes(),
    // A stalled process must not keep an account's rows locked from every other instance.
    idle_in_transaction_session_timeout: 30_000,
    lock_timeout: 10_000,
  });
  // An idle connection that the server drops is discarded by the pool; without a
  // listener the 'error' event would end the process.
  pool.on('error', () => {});
  return pool;
}

export function isRetryable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && RETRYABLE.has(code);
}

export const BEGIN = 'BEGIN ISOLATION LEVEL READ COMMITTED';

/**
 * One transaction on one pooled connection; retried whole on a serialization failure or deadlock.
 * With `begin` null, `run` opens the transaction itself, with its first statement (see `beginWith`).
 */
export async function inTransaction<T>(
  pool: Pool, run: (client: PoolClient) => Promise<T>, begin: string | null = BEGIN,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      if (begin !== null) await client.query(begin);
      const result = await run(client);
      if (!committed.delete(client)) await client.query('COMMIT');
      return result;
    } catch (err) {
      committed.delete(client);
      try {
        await client.query('ROLLBACK');
      } catch (rollback) {
        broken = rollback instanceof Error ? rollback : new Error(String(rollback));
      }
      if (!isRetryable(err) || attempt >= MAX_ATTEMPTS) throw err;
    } finally {
      client.release(broken);
    }
    await sleep(Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt) * (0.5 + Math.random()));
  }
}

/**
 * Applies the migrations this database lacks and answers its version. Several
 * instances starting at once take turns on an advisory lock held inside the
 * migration transaction: the first applies, the others find nothing to do.
 */
export async function migrate(pool: Pool, onProgress?: ProgressListener): Promise<number> {
  return inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)');
    const applied = await schemaVersion(client);
    onProgress?.(Math.min(applied, MIGRATIONS.length), MIGRATIONS.length);
    for (const [i, sql] of MIGRATIONS.entries()) {
      if (i + 1 <= applied) continue;
      await client.query(sql);
      await client.query('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)', [i + 1, Date.now()]);
      onProgress?.(i + 1, MIGRATIONS.length);
    }
    return Math.max(applied, MIGRATIONS.length);
  });
}

export async function schemaVersion(client: Pool | PoolClient): Promise<number> {
  const { rows } = await client.query<{ v: number }>('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations');
  return rows[0]?.v ?? 0;
}

/** The statements prepared with SQL PREPARE on each connection, by name. */
const prepared = new WeakMap<PoolClient, Set<string>>();

/** The connections whose transaction `commitWith` committed: `inTransaction` sends no COMMIT of its own. */
const committed = new WeakSet<PoolClient>();

type Scalar = string | number | null;
export type Argument = Scalar | Scalar[];

function number(value: number): string {
  if (!Number.isFinite(value)) throw new Error(`not a finite number: ${value}`);
  return String(value);
}

/** An array's text form (`{"a",2,NULL}`), whose type the statement's parameter gives. */
function arrayText(values: Scalar[]): string {
  const element = (v: Scalar) => v === null ? 'NULL'
    : typeof v === 'number' ? number(v) : `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
  return `{${values.map(element).join(',')}}`;
}

/** A literal of a statement argument: text, a finite number, null, or an array of those. */
function literal(value: Argument): string {
  if (value === null) return 'NULL';
  if (typeof value === 'number') return number(value);
  return escapeLiteral(Array.isArray(value) ? arrayText(value) : value);
}

/** `EXECUTE name(…)` of a statement PREPAREd once per connection (outside any transaction). */
async function execute(client: PoolClient, name: string, text: string, values: Argument[]): Promise<string> {
  let names = prepared.get(client);
  if (!names) prepared.set(client, names = new Set());
  if (!names.has(name)) {
    await client.query(`PREPARE ${name} AS ${text}`);
    names.add(name);
  }
  return `EXECUTE ${name}(${values.map(literal).join(', ')})`;
}

/**
 * Opens a transaction and runs its first statement in one round trip: `BEGIN; EXECUTE name(…)`
 * as one simple query (which takes no parameters, hence the escaped literals; the plan is the
 * prepared statement's, PREPAREd once per connection outside any transaction). Answers its rows.
 */
export async function beginWith<R extends QueryResultRow>(
  client: PoolClient, name: string, text: string, values: Argument[],
): Promise<R[]> {
  const results = await client.query<R>(`${BEGIN}; ${await execute(client, name, text, values)}`) as unknown as QueryResult<R>[];
  const rows = results[1]?.rows;
  if (!rows) throw new Error(`${name}: no result`);
  return rows;
}

/**
 * Runs the last statement of a transaction and commits it, in one round trip:
 * `EXECUTE name(…); COMMIT` (see `beginWith`). A statement that fails leaves the
 * COMMIT unrun, and `inTransaction` rolls back. Nothing may run after it.
 */
export async function commitWith<R extends QueryResultRow>(
  client: PoolClient, name: string, text: string, values: Argument[],
): Promise<R[]> {
  const results = await client.query<R>(`${await execute(client, name, text, values)}; COMMIT`) as unknown as QueryResult<R>[];
  const rows = results[0]?.rows;
  if (!rows) throw new Error(`${name}: no result`);
  committed.add(client);
  return rows;
}
