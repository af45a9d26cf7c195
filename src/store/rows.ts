/**
 * What both stores read the same way: a key's row as its record, and what an
 * Idempotency-Key claim means now. Times are epoch milliseconds on both.
 */
import type { ApiKeyRecord } from './types.js';

/** Idempotency-Key records live this long, then are pruned. */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000;
/**
 * A claim lives as long as its reservation is held. Before it has one (the
 * moments between claiming and reserving), it is live for this long; older, its
 * process died before reserving.
 */
const CLAIM_UNRESERVED_MS = 60_000;

export interface KeyRow {
  id: string; account_id: string; name: string | null; environment: 'live' | 'test';
  daily_credit_limit: number | null; rate_limit_rpm: number | null; redacted_key: string; salt: string; hash: string;
  created_at: number; last_used_at: number | null; revoked_at: number | null; spent_today: number;
}

export function toKeyRecord(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id, accountId: row.account_id, name: row.name, environment: row.environment,
    dailyCreditLimit: row.daily_credit_limit, rateLimitRpm: row.rate_limit_rpm, redactedKey: row.redacted_key,
    createdAt: new Date(row.created_at),
    lastUsedAt: row.last_used_at === null ? null : new Date(row.last_used_at),
    revokedAt: row.revoked_at === null ? null : new Date(row.revoked_at),
    creditsSpentToday: row.spent_today,
  };
}

export interface ClaimRow {
  fingerprint: string;
  state: 'running' | 'done';
  status: number | null;
  body: string | null;
  created_at: number;
  reservation_id: string | null;
  reservation_state: 'held' | 'settled' | 'released' | 'lapsed' | null;
}

/**
 * What an existing claim means now. Past 24 h it is gone. A running claim is as
 * alive as its reservation: held → still running; settled without a stored
 * response → its process died after delivering (the sweeper charged that), so it
 * is not run again; released or lapsed with nothing charged → free to retry.
 */
export function judgeClaim(row: ClaimRow, now: number): 'stale' | 'done' | 'running' | 'interrupted' {
  if (row.created_at < now - IDEMPOTENCY_WINDOW_MS) return 'stale';
  if (row.state === 'done') return 'done';
  if (row.reservation_id === null) return row.created_at >= now - CLAIM_UNRESERVED_MS ? 'running' : 'stale';
  switch (row.reservation_state) {
    case 'held': return 'running';
    case 'settled': return 'interrupted';
    default: return 'stale';
  }
}
