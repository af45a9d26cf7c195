/**
 * The Store on PostgreSQL (`pg`), for several gateway instances sharing one
 * ledger with the guarantees of one process: money moves in short row-locking
 * transactions (metering.ts), a key's cap and rate limit live on its row,
 * revocation is one committed UPDATE that the next authentication reads, and
 * any instance's sweeper closes a crashed instance's lapsed holds, each once.
 * Migrations run when the store opens, one instance at a time.
 */
import type { Pool } from 'pg';
import type { Clock } from '../../clock.js';
import { systemClock, utcDay } from '../../clock.js';
import { newId } from '../../ids.js';
import type {
  Account, ApiKeyRecord, Balances, CreditKind, Delivered, Grant, IdempotencyClaim, LeaseRenewal, LedgerReport, NewApiKey, ProgressListener, ReservationPlanner,
  ReserveOutcome, ReserveRequest, SettleRequest, SettleResult, Store, StoredApiKey, UsageQuery, UsageRow,
} from '../types.js';
import { IDEMPOTENCY_WINDOW_MS, judgeClaim, toKeyRecord, type ClaimRow, type KeyRow } from '../rows.js';
import { createPool, inTransaction, migrate, schemaVersion, type PoolOptions } from './database.js';
import { verifyLedger } from './ledger.js';
import { PostgresMetering } from './metering.js';

const PRUNE_BATCH = 1000;
const TOUCH_EVERY_MS = 60_000;

const KEY_SELECT = `SELECT k.id, k.account_id, k.name, k.environment, k.daily_credit_limit, k.rate_limit_rpm, k.redacted_key,
    k.salt, k.hash, k.created_at, k.last_used_at, k.revoked_at, COALESCE(d.spent, 0) AS spent_today
  FROM api_keys k LEFT JOIN key_days d ON d.key_id = k.id AND d.day = $2`;

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  private readonly metering: PostgresMetering;

  constructor(private readonly pool: Pool, private readonly clock: Clock = systemClock) {
    this.metering = new PostgresMetering(pool, clock);
  }

  /** Connects, applies the migrations this database lacks, and answers the store. */
  static async open(url: string, clock: Clock = systemClock, options: PoolOptions = {}): Promise<PostgresStore> {
    const pool = createPool(url, options);
    try {
      await migrate(pool);
    } catch (err) {
      await pool.end();
      throw err;
    }
    return new PostgresStore(pool, clock);
  }

  /** The highest migration applied. */
  async schemaVersion(): Promise<number> {
    return schemaVersion(this.pool);
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (!this.pool.ended) await this.pool.end();
  }

  async createAccount(name: string | null): Promise<Account> {
    const account = { id: newId('acct'), name, createdAt: this.now() };
    await this.pool.query('INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, $3)', [account.id, name, account.createdAt.getTime()]);
    return account;
  }

  async getAccount(id: string): Promise<Account | null> {
    const { rows } = await this.pool.query<{ id: string; name: string | null; created_at: number }>(
      'SELECT id, name, created_at FROM accounts WHERE id = $1', [id]);
    const row = rows[0];
    return row ? { id: row.id, name: row.name, createdAt: new Date(row.created_at) } : null;
  }

  async listAccounts({ limit, after }: { limit: number; after?: string | null }): Promise<Account[]> {
    const { rows } = await this.pool.query<{ id: string; name: string | null; created_at: number }>(
      'SELECT id, name, created_at FROM accounts WHERE id > $1 ORDER BY id LIMIT $2', [after ?? '', limit]);
    return rows.map((row) => ({ id: row.id, name: row.name, createdAt: new Date(row.created_at) }));
  }

  async grant(accountId: string, kind: CreditKind, amount: number, expiresAt: Date | null): Promise<Grant> {
    const grant: Grant = { id: newId('grant'), accountId, kind, amount, expiresAt, createdAt: this.now() };
    await inTransaction(this.pool, async (c) => {
      await c.query(`INSERT INTO grants (id, account_id, kind, amount, balance, expires_at, created_at)
        VALUES ($1, $2, $3, $4, $4, $5, $6)`, [grant.id, accountId, kind, amount, expiresAt?.getTime() ?? null, grant.createdAt.getTime()]);
      await c.query(`INSERT INTO ledger (account_id, grant_id, entry, amount, created_at) VALUES ($1, $2, 'grant', $3, $4)`,
        [accountId, grant.id, amount, grant.createdAt.getTime()]);
    });
    return grant;
  }

  async balances(accountId: string): Promise<Balances> {
    // Lapsed earned credits count only for what holds taken before expiry keep.
    const { rows } = await this.pool.query<{ earned: number; purchased: number; expires_at: number | null; reserved: number }>(`SELECT
        COALESCE(SUM(CASE WHEN kind = 'earned' AND expires_at > $2 THEN balance
                          WHEN kind = 'earned' THEN held ELSE 0 END), 0) AS earned,
        COALESCE(SUM(CASE WHEN kind = 'purchased' THEN balance ELSE 0 END), 0) AS purchased,
        MIN(CASE WHEN kind = 'earned' AND expires_at > $2 AND balance > 0 THEN expires_at END) AS expires_at,
        COALESCE(SUM(held), 0) AS reserved
      FROM grants WHERE account_id = $1 AND balance > 0`, [accountId, this.now().getTime()]);
    const row = rows[0] ?? { earned: 0, purchased: 0, expires_at: null, reserved: 0 };
    return {
      earned: row.earned,
      purchased: row.purchased,
      earnedExpiresAt: row.expires_at === null ? null : new Date(row.expires_at),
      reserved: row.reserved,
    };
  }

  async createApiKey(key: NewApiKey): Promise<ApiKeyRecord> {
    const createdAt = this.now();
    await this.pool.query(`INSERT INTO api_keys
      (id, account_id, name, environment, daily_credit_limit, rate_limit_rpm, redacted_key, salt, hash, created_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, [
      key.id, key.accountId, key.name, key.environment, key.dailyCreditLimit, key.rateLimitRpm,
      key.redactedKey, key.salt, key.hash, createdAt.getTime(),
    ]);
    return {
      id: key.id, accountId: key.accountId, name: key.name, environment: key.environment,
      dailyCreditLimit: key.dailyCreditLimit, rateLimitRpm: key.rateLimitRpm, redactedKey: key.redactedKey, createdAt,
      lastUsedAt: null, revokedAt: null, creditsSpentToday: 0,
    };
  }

  async findApiKey(id: string): Promise<StoredApiKey | null> {
    const { rows } = await this.pool.query<KeyRow>(`${KEY_SELECT} WHERE k.id = $1`, [id, this.today()]);
    const row = rows[0];
    return row ? { ...toKeyRecord(row), salt: row.salt, hash: row.hash } : null;
  }

  async listApiKeys(accountId: string): Promise<ApiKeyRecord[]> {
    const { rows } = await this.pool.query<KeyRow>(`${KEY_SELECT} WHERE k.account_id = $1 AND k.revoked_at IS NULL
      ORDER BY k.created_at DESC, k.seq DESC`, [accountId, this.today()]);
    return rows.map(toKeyRecord);
  }

  async revokeApiKey(accountId: string, keyId: string): Promise<boolean> {
    const result = await this.pool.query('UPDATE api_keys SET revoked_at = $3 WHERE id = $1 AND account_id = $2 AND revoked_at IS NULL',
      [keyId, accountId, this.now().getTime()]);
    return result.rowCount === 1;
  }

  async touchApiKey(keyId: string): Promise<void> {
    const now = this.now().getTime();
    await this.pool.query('UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $3)',
      [keyId, now, now - TOUCH_EVERY_MS]);
  }

  reserve(request: ReserveRequest, plan: ReservationPlanner): Promise<ReserveOutcome> {
    return this.metering.reserve(request, plan);
  }

  renewLease(reservationId: string, leaseMs: number, delivered?: Delivered | null): Promise<boolean> {
    return this.metering.renewLease(reservationId, leaseMs, delivered);
  }

  renewLeases(renewals: readonly LeaseRenewal[]): Promise<Set<string>> {
    return this.metering.renewLeases(renewals);
  }

  settle(request: SettleRequest): Promise<SettleResult> {
    return this.metering.settle(request);
  }

  release(reservationId: string): Promise<void> {
    return this.metering.release(reservationId);
  }

  async releaseExpiredLeases(): Promise<number> {
    const closed = await this.metering.releaseExpiredLeases();
    await this.metering.expireAllLapsed();
    return closed;
  }

  async usage(query: UsageQuery): Promise<UsageRow[]> {
    const { rows } = await this.pool.query<UsageRow>(`SELECT
        to_char(to_timestamp(settled_at / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS date, model COLLATE "C" AS model,
        COUNT(*) AS requests, SUM(prompt_tokens) AS "promptTokens", SUM(completion_tokens) AS "completionTokens",
        SUM(credits) AS credits
      FROM completions
      WHERE account_id = $1 AND settled_at >= $2 AND settled_at < $3 AND ($4::text IS NULL OR model = $4::text)
      GROUP BY 1, 2 ORDER BY 1, 2`,
    [query.accountId, query.from.getTime(), query.until.getTime(), query.model ?? null]);
    return rows;
  }

  verifyLedger(onProgress?: ProgressListener): Promise<LedgerReport> {
    return verifyLedger(this.pool, onProgress);
  }

  /**
   * Unique across instances by the primary key: the first INSERT wins, a
   * concurrent one waits for it and then finds its row, locked while judged.
   */
  async claimIdempotencyKey(accountId: string, key: string, fingerprint: string): Promise<IdempotencyClaim> {
    return inTransaction(this.pool, async (c): Promise<IdempotencyClaim> => {
      const now = this.now().getTime();
      for (let attempt = 0; attempt < 5; attempt++) {
        const inserted = await c.query(`INSERT INTO idempotency_keys (account_id, key, fingerprint, state, created_at, reservation_id)
          VALUES ($1, $2, $3, 'running', $4, NULL) ON CONFLICT (account_id, key) DO NOTHING`, [accountId, key, fingerprint, now]);
        if (inserted.rowCount === 1) return { state: 'claimed' };
        // The claim is locked first and its reservation read by a statement of its own: under READ
        // COMMITTED a statement that waited for the lock re-reads the locked row but not a row it
        // joins, so a claim linked to its reservation meanwhile would seem to have none (stale).
        const { rows } = await c.query<Omit<ClaimRow, 'reservation_state'>>(`SELECT fingerprint, state, status, body, created_at,
            reservation_id FROM idempotency_keys WHERE account_id = $1 AND key = $2 FOR UPDATE`, [accountId, key]);
        const claim = rows[0];
        if (!claim) continue; // deleted since the INSERT looked: try again
        const reservation = claim.reservation_id === null ? undefined
          : (await c.query<{ state: ClaimRow['reservation_state'] }>('SELECT state FROM reservations WHERE id = $1', [claim.reservation_id])).rows[0];
        const row: ClaimRow = { ...claim, reservation_state: reservation?.state ?? null };
        const seen = judgeClaim(row, now);
        if (seen === 'stale') {
          await c.query(`UPDATE idempotency_keys SET fingerprint = $3, state = 'running', status = NULL, body = NULL,
            created_at = $4, reservation_id = NULL WHERE account_id = $1 AND key = $2`, [accountId, key, fingerprint, now]);
          return { state: 'claimed' };
        }
        if (row.fingerprint !== fingerprint) return { state: 'mismatch' };
        if (seen === 'done') return { state: 'done', response: { status: row.status ?? 200, body: JSON.parse(row.body ?? 'null') } };
        return { state: seen };
      }
      throw new Error(`Idempotency-Key claim ${key}: the record kept vanishing`);
    });
  }

  async abandonIdempotencyKey(accountId: string, key: string): Promise<void> {
    await this.pool.query(`DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND state = 'running' AND reservation_id IS NULL`,
      [accountId, key]);
  }

  async pruneIdempotencyKeys(): Promise<number> {
    const before = this.now().getTime() - IDEMPOTENCY_WINDOW_MS;
    const result = await this.pool.query(`DELETE FROM idempotency_keys WHERE (account_id, key) IN
      (SELECT account_id, key FROM idempotency_keys WHERE created_at < $1 LIMIT ${PRUNE_BATCH} FOR UPDATE SKIP LOCKED)`, [before]);
    return result.rowCount ?? 0;
  }

  private now(): Date {
    return this.clock.now();
  }

  private today(): string {
    return utcDay(this.now());
  }
}
