/**
 * The Store on SQLite (better-sqlite3): WAL with synchronous=FULL, so a
 * committed change survives a crash or power loss. The driver is synchronous;
 * the methods are `async` to keep the interface that PostgreSQL shares.
 */
import { mkdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Database, Statement } from 'better-sqlite3';
import type { Clock } from '../../clock.js';
import { systemClock, utcDay } from '../../clock.js';
import { newId } from '../../ids.js';
import type {
  Account, ApiKeyRecord, Balances, CreditKind, Delivered, Grant, IdempotencyClaim, LeaseRenewal, LedgerReport, NewApiKey, ProgressListener, ReservationPlanner,
  ReserveOutcome, ReserveRequest, SettleRequest, SettleResult, Store, StoredApiKey, UsageQuery, UsageRow,
} from '../types.js';
import { IDEMPOTENCY_WINDOW_MS, judgeClaim, toKeyRecord, type ClaimRow, type KeyRow } from '../rows.js';
import { SqliteMetering } from './metering.js';
import { MIGRATIONS } from './schema.js';

const PRUNE_BATCH = 1000;
const TOUCH_EVERY_MS = 60_000;
/** How long one write waits synchronously for another process's lock, then in total with async retries. */
const BUSY_TIMEOUT_MS = 25;
const BUSY_DEADLINE_MS = 10_000;
const BUSY_BACKOFF_MAX_MS = 100;
/** At most this many writes share one commit, so that one batch never holds the loop for long. */
const MAX_BATCH = 256;

function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/** Opens the file and applies the migrations it lacks, telling `onMigrate(applied, of)` after each. */
export function openSqliteDatabase(path: string, onMigrate?: ProgressListener): Database {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new BetterSqlite3(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  // At boot, waiting on another process's migration may block: nothing else runs yet.
  db.pragma(`busy_timeout = ${BUSY_DEADLINE_MS}`);
  migrate(db, onMigrate);
  db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  return db;
}

function migrate(db: Database, onProgress?: ProgressListener): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)');
  db.transaction(() => {
    const applied = (db.prepare('SELECT COALESCE(MAX(version), 0) AS v FROM schema_migrations').get() as { v: number }).v;
    onProgress?.(Math.min(applied, MIGRATIONS.length), MIGRATIONS.length);
    MIGRATIONS.forEach((sql, i) => {
      if (i + 1 <= applied) return;
      db.exec(sql);
      db.prepare('INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)').run(i + 1, Date.now());
      onProgress?.(i + 1, MIGRATIONS.length);
    });
  }).immediate();
}

export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly metering: SqliteMetering;
  private readonly statements = new Map<string, Statement>();
  /** Writes waiting for the next group commit, and whether a flush is under way. */
  private readonly queue: Array<{ run: () => unknown; resolve: (value: unknown) => void; reject: (error: unknown) => void }> = [];
  private flushing = false;
  private readonly drained: Array<() => void> = [];

  constructor(private readonly db: Database, private readonly clock: Clock = systemClock) {
    this.metering = new SqliteMetering(db, clock);
  }

  static open(path: string, clock: Clock = systemClock): SqliteStore {
    return new SqliteStore(openSqliteDatabase(path), clock);
  }

  async ping(): Promise<void> {
    this.sql('SELECT 1').get();
  }

  async close(): Promise<void> {
    // Writes already asked for are committed (or refused) before the connection goes.
    if (this.flushing) await new Promise<void>((resolve) => this.drained.push(resolve));
    if (this.db.open) this.db.close();
  }

  async createAccount(name: string | null): Promise<Account> {
    return this.write(() => {
      const account = { id: newId('acct'), name, createdAt: this.now() };
      this.sql('INSERT INTO accounts (id, name, created_at) VALUES (?, ?, ?)').run(account.id, name, account.createdAt.getTime());
      return account;
    });
  }

  async getAccount(id: string): Promise<Account | null> {
    const row = this.sql('SELECT id, name, created_at FROM accounts WHERE id = ?').get(id) as
      { id: string; name: string | null; created_at: number } | undefined;
    return row ? { id: row.id, name: row.name, createdAt: new Date(row.created_at) } : null;
  }

  async listAccounts({ limit, after }: { limit: number; after?: string | null }): Promise<Account[]> {
    const rows = this.sql('SELECT id, name, created_at FROM accounts WHERE id > ? ORDER BY id LIMIT ?').all(after ?? '', limit) as
      Array<{ id: string; name: string | null; created_at: number }>;
    return rows.map((row) => ({ id: row.id, name: row.name, createdAt: new Date(row.created_at) }));
  }

  async grant(accountId: string, kind: CreditKind, amount: number, expiresAt: Date | null): Promise<Grant> {
    return this.write(() => {
      const grant: Grant = { id: newId('grant'), accountId, kind, amount, expiresAt, createdAt: this.now() };
      this.db.transaction(() => {
        this.sql(`INSERT INTO grants (id, account_id, kind, amount, balance, expires_at, created_at)
          VALUES (?, ?, ?, ?, ?, ?, ?)`).run(grant.id, accountId, kind, amount, amount, expiresAt?.getTime() ?? null, grant.createdAt.getTime());
        this.sql(`INSERT INTO ledger (account_id, grant_id, entry, amount, created_at) VALUES (?, ?, 'grant', ?, ?)`)
          .run(accountId, grant.id, amount, grant.createdAt.getTime());
      }).immediate();
      return grant;
    });
  }

  async balances(accountId: string): Promise<Balances> {
    const now = this.now().getTime();
    // Lapsed earned credits count only for what holds taken before expiry keep.
    const row = this.sql(`SELECT
        COALESCE(SUM(CASE WHEN kind = 'earned' AND expires_at > @now THEN balance
                          WHEN kind = 'earned' THEN held ELSE 0 END), 0) AS earned,
        COALESCE(SUM(CASE WHEN kind = 'purchased' THEN balance ELSE 0 END), 0) AS purchased,
        MIN(CASE WHEN kind = 'earned' AND expires_at > @now AND balance > 0 THEN expires_at END) AS expires_at,
        COALESCE(SUM(held), 0) AS reserved
      FROM grants WHERE account_id = @account AND balance > 0`).get({ now, account: accountId }) as
      { earned: number; purchased: number; expires_at: number | null; reserved: number };
    return {
      earned: row.earned,
      purchased: row.purchased,
      earnedExpiresAt: row.expires_at === null ? null : new Date(row.expires_at),
      reserved: row.reserved,
    };
  }

  async createApiKey(key: NewApiKey): Promise<ApiKeyRecord> {
    return this.write(() => {
      const createdAt = this.now();
      this.sql(`INSERT INTO api_keys
        (id, account_id, name, environment, daily_credit_limit, rate_limit_rpm, redacted_key, salt, hash, created_at)
        VALUES (@id, @accountId, @name, @environment, @dailyCreditLimit, @rateLimitRpm, @redactedKey, @salt, @hash, @createdAt)`)
        .run({ ...key, createdAt: createdAt.getTime() });
      return {
        id: key.id, accountId: key.accountId, name: key.name, environment: key.environment,
        dailyCreditLimit: key.dailyCreditLimit, rateLimitRpm: key.rateLimitRpm, redactedKey: key.redactedKey, createdAt,
        lastUsedAt: null, revokedAt: null, creditsSpentToday: 0,
      };
    });
  }

  async findApiKey(id: string): Promise<StoredApiKey | null> {
    const row = this.sql(`${KEY_SELECT} WHERE k.id = @id`).get({ id, day: this.today() }) as KeyRow | undefined;
    return row ? { ...toKeyRecord(row), salt: row.salt, hash: row.hash } : null;
  }

  async listApiKeys(accountId: string): Promise<ApiKeyRecord[]> {
    const rows = this.sql(`${KEY_SELECT} WHERE k.account_id = @accountId AND k.revoked_at IS NULL
      ORDER BY k.created_at DESC, k.rowid DESC`).all({ accountId, day: this.today() }) as KeyRow[];
    return rows.map(toKeyRecord);
  }

  async revokeApiKey(accountId: string, keyId: string): Promise<boolean> {
    return this.write(() => {
      const result = this.sql(`UPDATE api_keys SET revoked_at = ? WHERE id = ? AND account_id = ? AND revoked_at IS NULL`)
        .run(this.now().getTime(), keyId, accountId);
      return result.changes === 1;
    });
  }

  async touchApiKey(keyId: string): Promise<void> {
    return this.write(() => {
      const now = this.now().getTime();
      this.sql(`UPDATE api_keys SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)`)
        .run(now, keyId, now - TOUCH_EVERY_MS);
    });
  }

  async reserve(request: ReserveRequest, plan: ReservationPlanner): Promise<ReserveOutcome> {
    return this.write(() => this.metering.reserve(request, plan));
  }

  async renewLease(reservationId: string, leaseMs: number, delivered?: Delivered | null): Promise<boolean> {
    return this.write(() => this.metering.renewLease(reservationId, leaseMs, delivered));
  }

  async renewLeases(renewals: readonly LeaseRenewal[]): Promise<Set<string>> {
    if (renewals.length === 0) return new Set();
    return this.write(() => this.metering.renewLeases(renewals));
  }

  async settle(request: SettleRequest): Promise<SettleResult> {
    return this.write(() => this.metering.settle(request));
  }

  async release(reservationId: string): Promise<void> {
    return this.write(() => this.metering.release(reservationId));
  }

  async releaseExpiredLeases(): Promise<number> {
    const released = await this.write(() => this.metering.releaseExpiredLeases());
    await this.write(() => this.metering.expireAllLapsed());
    return released;
  }

  async usage(query: UsageQuery): Promise<UsageRow[]> {
    const rows = this.sql(`SELECT strftime('%Y-%m-%d', settled_at / 1000, 'unixepoch') AS date, model,
        COUNT(*) AS requests, SUM(prompt_tokens) AS promptTokens, SUM(completion_tokens) AS completionTokens,
        SUM(credits) AS credits
      FROM completions
      WHERE account_id = @account AND settled_at >= @from AND settled_at < @until AND (@model IS NULL OR model = @model)
      GROUP BY date, model ORDER BY date, model`)
      .all({ account: query.accountId, from: query.from.getTime(), until: query.until.getTime(), model: query.model ?? null });
    return rows as UsageRow[];
  }

  async verifyLedger(onProgress?: ProgressListener): Promise<LedgerReport> {
    return this.metering.verifyLedger(onProgress);
  }

  async claimIdempotencyKey(accountId: string, key: string, fingerprint: string): Promise<IdempotencyClaim> {
    return this.write(() => {
      return this.db.transaction((): IdempotencyClaim => {
        const now = this.now().getTime();
        const row = this.sql(`SELECT i.fingerprint, i.state, i.status, i.body, i.created_at, i.reservation_id, r.state AS reservation_state
          FROM idempotency_keys i LEFT JOIN reservations r ON r.id = i.reservation_id
          WHERE i.account_id = ? AND i.key = ?`).get(accountId, key) as ClaimRow | undefined;
        const seen = row ? judgeClaim(row, now) : 'stale';
        if (row && seen !== 'stale') {
          if (row.fingerprint !== fingerprint) return { state: 'mismatch' };
          if (seen === 'done') return { state: 'done', response: { status: row.status ?? 200, body: JSON.parse(row.body ?? 'null') } };
          return { state: seen };
        }
        this.sql(`INSERT OR REPLACE INTO idempotency_keys (account_id, key, fingerprint, state, created_at, reservation_id)
          VALUES (?, ?, ?, 'running', ?, NULL)`).run(accountId, key, fingerprint, now);
        return { state: 'claimed' };
      }).immediate();
    });
  }

  async abandonIdempotencyKey(accountId: string, key: string): Promise<void> {
    return this.write(() => {
      this.sql(`DELETE FROM idempotency_keys WHERE account_id = ? AND key = ? AND state = 'running' AND reservation_id IS NULL`)
        .run(accountId, key);
    });
  }

  async pruneIdempotencyKeys(): Promise<number> {
    return this.write(() => {
      const before = this.now().getTime() - IDEMPOTENCY_WINDOW_MS;
      return this.sql(`DELETE FROM idempotency_keys WHERE rowid IN
        (SELECT rowid FROM idempotency_keys WHERE created_at < ? LIMIT ${PRUNE_BATCH})`).run(before).changes;
    });
  }

  private now(): Date {
    return this.clock.now();
  }

  /**
   * Runs a write, durably, sharing the commit with whatever other writes
   * arrive before it starts (group commit). Writes queue; one flush per turn
   * of the event loop runs the queue in a single BEGIN IMMEDIATE … COMMIT,
   * each write in a savepoint of its own, so a write that throws undoes only
   * itself. Every promise settles after the COMMIT that holds its change has
   * returned (WAL, synchronous=FULL): an answered write is on disk. One fsync
   * then serves a whole batch instead of each request paying for two.
   */
  private write<T>(run: () => T): Promise<T> {
    if (!this.db.open) return Promise.reject(new TypeError('The database connection is not open'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, MAX_BATCH);
      let outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }>;
      try {
        await this.begin();
        outcomes = batch.map((op) => {
          try {
            return { ok: true as const, value: this.db.transaction(op.run)() };
          } catch (error) {
            return { ok: false as const, error };
          }
        });
        // An I/O error can make SQLite roll the whole transaction back: then nothing of the batch holds.
        if (!this.db.inTransaction) throw new Error('SQLite rolled the batch back');
        this.sql('COMMIT').run();
      } catch (error) {
        if (this.db.open && this.db.inTransaction) this.sql('ROLLBACK').run();
        outcomes = batch.map(() => ({ ok: false as const, error }));
      }
      batch.forEach((op, i) => {
        const outcome = outcomes[i]!;
        if (outcome.ok) op.resolve(outcome.value);
        else op.reject(outcome.error);
      });
    }
    this.flushing = false;
    for (const waiter of this.drained.splice(0)) waiter();
  }

  /**
   * Takes the write lock. Another process holding it makes SQLite answer BUSY
   * after a short synchronous wait; the retry then waits asynchronously, so a
   * long lock elsewhere never freezes this process's event loop.
   */
  private async begin(): Promise<void> {
    const deadline = Date.now() + BUSY_DEADLINE_MS;
    for (let attempt = 0; ; attempt++) {
      if (!this.db.open) throw new TypeError('The database connection is not open');
      try {
        this.sql('BEGIN IMMEDIATE').run();
        return;
      } catch (err) {
        if (!isBusy(err) || Date.now() >= deadline) throw err;
        await sleep(Math.min(BUSY_BACKOFF_MAX_MS, 2 ** attempt) * (0.5 + Math.random()));
      }
    }
  }

  /** Each statement is prepared once, on first use. */
  private sql(text: string): Statement {
    let statement = this.statements.get(text);
    if (!statement) {
      statement = this.db.prepare(text);
      this.statements.set(text, statement);
    }
    return statement;
  }

  private today(): string {
    return utcDay(this.now());
  }
}

const KEY_SELECT = `SELECT k.*, COALESCE(d.spent, 0) AS spent_today FROM api_keys k
  LEFT JOIN key_days d ON d.key_id = k.id AND d.day = @day`;
