/**
 * `verifyLedger` on PostgreSQL: every grant's balance recomputed from the
 * ledger, every hold from the reservations in flight, every settled charge from
 * its ledger entries. One REPEATABLE READ snapshot, so that requests settling
 * meanwhile cannot show as disagreements; the comparison runs in SQL, so only
 * the disagreements travel.
 */
import type { Pool } from 'pg';
import type { LedgerDisagreement, LedgerReport, ProgressListener } from '../types.js';
import { inTransaction } from './database.js';

interface Compared {
  account_id: string;
  subject: string;
  stored: number;
  recomputed: number;
}

const KEY_HELD = `SELECT k.account_id, k.id AS subject, k.held AS stored, COALESCE(o.total, 0) AS recomputed
  FROM api_keys k LEFT JOIN (SELECT key_id, SUM(amount) AS total FROM reservations WHERE state = 'held' GROUP BY key_id) o
    ON o.key_id = k.id
  WHERE k.held <> COALESCE(o.total, 0) ORDER BY k.seq`;

const GRANTS = `SELECT g.account_id, g.id AS subject, g.created_at, g.balance, g.held,
    COALESCE(l.total, 0) AS ledger_balance, COALESCE(o.total, 0) AS open_holds
  FROM grants g
  LEFT JOIN (SELECT grant_id, SUM(amount) AS total FROM ledger WHERE grant_id IS NOT NULL GROUP BY grant_id) l ON l.grant_id = g.id
  LEFT JOIN (SELECT h.grant_id, SUM(h.amount) AS total FROM reservation_holds h
             JOIN reservations r ON r.id = h.reservation_id WHERE r.state = 'held' GROUP BY h.grant_id) o ON o.grant_id = g.id`;

const GRANT_BALANCE = `SELECT account_id, subject, balance AS stored, ledger_balance AS recomputed FROM (${GRANTS}) x
  WHERE balance <> ledger_balance ORDER BY created_at, subject`;

const GRANT_HELD = `SELECT account_id, subject, held AS stored, open_holds AS recomputed FROM (${GRANTS}) x
  WHERE held <> open_holds ORDER BY created_at, subject`;

const CHARGED = `SELECT r.account_id, r.id AS subject, r.charged AS stored, COALESCE(l.total, 0) AS recomputed
  FROM reservations r
  LEFT JOIN (SELECT reservation_id, -SUM(amount) AS total FROM ledger WHERE entry = 'charge' GROUP BY reservation_id) l
    ON l.reservation_id = r.id
  WHERE r.state = 'settled' AND r.charged <> COALESCE(l.total, 0) ORDER BY r.created_at, r.id`;

const COUNTS = `SELECT (SELECT COUNT(*) FROM accounts) AS accounts, (SELECT COUNT(*) FROM grants) AS grants,
  (SELECT COUNT(*) FROM ledger) AS entries`;

/** `onProgress` is told after each of its five queries. */
export function verifyLedger(pool: Pool, onProgress?: ProgressListener): Promise<LedgerReport> {
  const QUERIES = 5;
  return inTransaction(pool, async (c) => {
    let done = 0;
    onProgress?.(done, QUERIES);
    const found = async (sql: string, field: LedgerDisagreement['field']): Promise<LedgerDisagreement[]> => {
      const { rows } = await c.query<Compared>(sql);
      onProgress?.(++done, QUERIES);
      return rows.map((r) => ({ accountId: r.account_id, subject: r.subject, field, stored: r.stored, recomputed: r.recomputed }));
    };
    const disagreements = [
      ...await found(KEY_HELD, 'held'),
      ...await found(GRANT_BALANCE, 'balance'),
      ...await found(GRANT_HELD, 'held'),
      ...await found(CHARGED, 'charged'),
    ];
    const counts = (await c.query<{ accounts: number; grants: number; entries: number }>(COUNTS)).rows[0];
    onProgress?.(++done, QUERIES);
    return { accounts: counts?.accounts ?? 0, grants: counts?.grants ?? 0, entries: counts?.entries ?? 0, disagreements };
  }, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
}
