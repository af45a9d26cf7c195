/**
 * The SQLite Store on a temp file, for tests that drive it directly: accounts
 * with grants and a key, fixed-amount planners, and a raw connection to read
 * (or tamper with) the tables behind the Store's back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import type { Database } from 'better-sqlite3';
import type { Clock } from '../../src/clock.js';
import { issueApiKey } from '../../src/keys/issue.js';
import { newId } from '../../src/ids.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Funds, ReservationPlanner, ReserveOutcome, Store } from '../../src/store/types.js';

export interface TempStore {
  store: SqliteStore;
  path: string;
  /** A second connection, opened on first use. */
  raw(): Database;
  /** Another Store on the same file (another instance or process would do the same). */
  openAnother(clock?: Clock): SqliteStore;
  cleanup(): Promise<void>;
}

export function openTempStore(clock?: Clock): TempStore {
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

export interface AccountSpec {
  purchased?: number;
  earned?: Array<{ amount: number; expiresAt: Date | string }>;
  dailyCreditLimit?: number | null;
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
  const { record } = await issueApiKey(store, account.id, { daily_credit_limit: spec.dailyCreditLimit ?? null });
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
  store: Store, account: FixtureAccount, amount: number, options: { leaseMs?: number; seen?: Funds[]; idempotencyKey?: string } = {},
): Promise<{ id: string; outcome: ReserveOutcome }> {
  const id = newId('res');
  const outcome = await store.reserve(
    {
      reservationId: id, accountId: account.accountId, keyId: account.keyId, model: 'svc-fast', leaseMs: options.leaseMs ?? 30_000,
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

export function grantState(raw: Database, grantId: string): GrantState {
  return raw.prepare('SELECT id, kind, balance, held FROM grants WHERE id = ?').get(grantId) as GrantState;
}

export interface LedgerRow {
  grant_id: string | null;
  entry: string;
  amount: number;
  reservation_id: string | null;
  shortfall: number;
}

export function ledgerRows(raw: Database, where: { accountId?: string; reservationId?: string; grantId?: string }): LedgerRow[] {
  const clauses: string[] = [];
  const params: string[] = [];
  if (where.accountId) { clauses.push('account_id = ?'); params.push(where.accountId); }
  if (where.reservationId) { clauses.push('reservation_id = ?'); params.push(where.reservationId); }
  if (where.grantId) { clauses.push('grant_id = ?'); params.push(where.grantId); }
  return raw.prepare(`SELECT grant_id, entry, amount, reservation_id, shortfall FROM ledger
    WHERE ${clauses.join(' AND ') || '1'} ORDER BY seq`).all(...params) as LedgerRow[];
}

export function holdsOf(raw: Database, reservationId: string): Array<{ grant_id: string; amount: number }> {
  return raw.prepare('SELECT grant_id, amount FROM reservation_holds WHERE reservation_id = ? ORDER BY rowid')
    .all(reservationId) as Array<{ grant_id: string; amount: number }>;
}
