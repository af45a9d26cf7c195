/**
 * What is compared and checked after a step. `snapshot` reads the same view of
 * the touched accounts from the store (through its API and, behind its back,
 * from its tables) and from the model, so the two compare as JSON. `invariants`
 * checks, on the store alone, what must hold whatever the model says.
 */
import { utcDay } from '../src/clock.js';
import type { Store } from '../src/store/types.js';
import { PURCHASED, type Model } from './model.js';
import type { Target } from './target.js';

export interface Violation {
  step: number;
  invariant: string;
  detail: string;
}

export class ViolationError extends Error {
  constructor(readonly invariant: string, readonly detail: string) {
    super(`${invariant}: ${detail}`);
  }
}

export function fail(invariant: string, detail: string): never {
  throw new ViolationError(invariant, detail);
}

type Snap = Record<string, unknown>;

interface GrantRow { id: string; kind: string; balance: number; held: number; expires_at: number | null }
interface KeyRow { id: string; held: number; revoked_at: number | null; daily_credit_limit: number | null }
interface DayRow { key_id: string; day: string; spent: number }
interface ResRow { id: string; state: string; charged: number }
interface ClaimRow { key: string; fingerprint: string; state: string; reservation_id: string | null }

/** The store's view of `accounts`: balances, live grants, keys, open (and named) reservations, claims. */
export async function storeSnapshot(target: Target, store: Store, model: Model, accounts: string[], names: string[], now: number): Promise<Snap> {
  const out: Snap = {};
  const keyName = new Map(Object.values(model.s.keys).map((k) => [k.id, k.name]));
  const today = utcDay(new Date(now));
  for (const name of accounts) {
    const id = model.account(name)!.id;
    // Read at once: on PostgreSQL each is a round trip on its own connection.
    const [b, grants, keys, days, res, holds, claims, named] = await Promise.all([
      store.balances(id),
      target.rows<GrantRow>('SELECT id, kind, balance, held, expires_at FROM grants WHERE account_id = ? AND balance > 0', id),
      // A revoked key with nothing held and nothing settled today shows the same on both sides
      // ({held 0, revoked, no days}) whatever it did before, so each side leaves such keys out.
      target.rows<KeyRow>(`SELECT id, held, revoked_at, daily_credit_limit FROM api_keys k WHERE account_id = ?
        AND (revoked_at IS NULL OR held <> 0 OR EXISTS (SELECT 1 FROM key_days d WHERE d.key_id = k.id AND d.day = ? AND d.spent <> 0))`,
      id, today),
      target.rows<DayRow>(`SELECT d.key_id, d.day, d.spent FROM key_days d JOIN api_keys k ON k.id = d.key_id
        WHERE k.account_id = ? AND d.day = ? AND d.spent > 0`, id, today),
      // By key: open reservations have an index per key (reservations_held_by_key), none per account.
      target.rows<ResRow>(`SELECT id, state, charged FROM reservations
        WHERE state = 'held' AND key_id IN (SELECT id FROM api_keys WHERE account_id = ?)`, id),
      // Which grants each open reservation holds: equal totals can hide holds taken in another order.
      target.rows<{ reservation_id: string; grant_id: string; kind: string; amount: number }>(`
        SELECT h.reservation_id, h.grant_id, g.kind, h.amount FROM reservation_holds h
        JOIN reservations r ON r.id = h.reservation_id JOIN grants g ON g.id = h.grant_id
        WHERE r.state = 'held' AND r.key_id IN (SELECT id FROM api_keys WHERE account_id = ?)`, id),
      target.rows<ClaimRow>('SELECT key, fingerprint, state, reservation_id FROM idempotency_keys WHERE account_id = ?', id),
      names.length === 0 ? Promise.resolve([]) : target.rows<ResRow>(
        `SELECT id, state, charged FROM reservations WHERE account_id = ? AND id IN (${names.map(() => '?').join(', ')})`, id, ...names),
    ]);
    const holdsOf = (r: string) => {
      const out: Record<string, number> = {};
      for (const h of holds.filter((x) => x.reservation_id === r)) {
        const k = h.kind === 'purchased' ? PURCHASED : h.grant_id;
        out[k] = (out[k] ?? 0) + h.amount;
      }
      return out;
    };
    for (const g of grants) {
      if (g.balance < 0 || g.held < 0 || g.held > g.balance) fail('no balance or hold below zero', `grant ${g.id}: balance ${g.balance}, held ${g.held}`);
    }
    for (const k of keys) {
      if (k.held < 0) fail('no balance or hold below zero', `key ${k.id} holds ${k.held}`);
      const spent = days.find((d) => d.key_id === k.id && d.day === today)?.spent ?? 0;
      if (k.daily_credit_limit !== null && spent + k.held > k.daily_credit_limit) {
        fail('no key over its cap', `key ${k.id}: settled ${spent} today + ${k.held} held > cap ${k.daily_credit_limit}`);
      }
    }
    const earned: Record<string, [number, number]> = {};
    const purchased = [0, 0];
    for (const g of grants) {
      if (g.kind === 'purchased') {
        purchased[0]! += g.balance;
        purchased[1]! += g.held;
        continue;
      }
      const balance = g.expires_at !== null && g.expires_at <= now ? g.held : g.balance;
      if (balance > 0 || g.held > 0) earned[g.id] = [balance, g.held];
    }
    out[name] = {
      balances: { ...b, earnedExpiresAt: b.earnedExpiresAt?.getTime() ?? null },
      earned, purchased,
      keys: Object.fromEntries(keys.map((k) => [keyName.get(k.id) ?? k.id, {
        held: k.held, revoked: k.revoked_at !== null,
        days: Object.fromEntries(days.filter((d) => d.key_id === k.id).map((d) => [d.day, d.spent]).sort()),
      }]).sort()),
      res: Object.fromEntries([...res, ...named].map((r) => [r.id, r.state === 'held' ? [r.state, r.charged, holdsOf(r.id)] : [r.state, r.charged]]).sort()),
      claims: Object.fromEntries(claims.map((c) => [c.key, [c.fingerprint, c.state, c.reservation_id]]).sort()),
    };
  }
  return out;
}

/** The model's view of the same, in the same shape. */
export function modelSnapshot(model: Model, accounts: string[], names: string[], now: number): Snap {
  const out: Snap = {};
  for (const name of accounts) {
    const acc = model.account(name)!;
    const balances = model.balances(name, now);
    const earned: Record<string, [number, number]> = {};
    for (const g of acc.earned) if (g.balance > 0 || g.held > 0) earned[g.id] = [g.balance, g.held];
    const today = utcDay(new Date(now));
    const keys = Object.values(model.s.keys)
      .filter((k) => k.account === name && (!k.revoked || k.held !== 0 || (k.spent[today] ?? 0) !== 0));
    const res = model.reservations(name, names);
    out[name] = {
      balances, earned, purchased: [acc.purchased.balance, acc.purchased.held],
      keys: Object.fromEntries(keys.map((k) => [k.name, {
        held: k.held, revoked: k.revoked,
        days: Object.fromEntries(Object.entries(k.spent).filter(([day, v]) => v > 0 && day === today).sort()),
      }]).sort()),
      res: Object.fromEntries(res.map((r) => [r.name, r.state === 'held' ? [r.state, r.charged, r.holds] : [r.state, r.charged]]).sort()),
      claims: Object.fromEntries(Object.entries(acc.claims).map(([key, c]) => [key, [c.fp, c.state, c.res]]).sort()),
    };
  }
  return out;
}

/** Checks on the whole database that hold whatever the model predicts. */
export async function invariants(target: Target, model: Model, now: number): Promise<void> {
  const bad = await target.rows<GrantRow>('SELECT id, kind, balance, held, expires_at FROM grants WHERE balance < 0 OR held < 0 OR held > balance');
  if (bad.length > 0) fail('no balance or hold below zero', JSON.stringify(bad));
  const overCap = await target.rows<DayRow & { lim: number }>(`SELECT d.key_id, d.day, d.spent, k.daily_credit_limit AS lim
    FROM key_days d JOIN api_keys k ON k.id = d.key_id WHERE k.daily_credit_limit IS NOT NULL AND d.spent > k.daily_credit_limit`);
  if (overCap.length > 0) fail('no key over its cap on any UTC day', JSON.stringify(overCap));
  const twice = await target.rows<{ id: string; state: string }>(`SELECT DISTINCT r.id, r.state FROM ledger l
    JOIN reservations r ON r.id = l.reservation_id WHERE l.entry = 'charge' AND r.state <> 'settled'`);
  if (twice.length > 0) fail('each reservation closed at most once', `charges on reservations not settled: ${JSON.stringify(twice)}`);
  // Earned credits charged at or after their expiry: only from the charging reservation's own hold on them.
  const late = await target.rows<{ reservation_id: string; grant_id: string; spent: number; hold: number }>(`
    SELECT l.reservation_id, l.grant_id, -SUM(l.amount) AS spent, COALESCE(MAX(h.amount), 0) AS hold
    FROM ledger l JOIN grants g ON g.id = l.grant_id
      LEFT JOIN reservation_holds h ON h.reservation_id = l.reservation_id AND h.grant_id = l.grant_id
    WHERE l.entry = 'charge' AND g.kind = 'earned' AND l.created_at >= g.expires_at
    GROUP BY l.reservation_id, l.grant_id HAVING -SUM(l.amount) > COALESCE(MAX(h.amount), 0)`);
  const spentLate = late;
  if (spentLate.length > 0) fail('no earned credit spent after its expiry', JSON.stringify(spentLate));
  // The sum of charges equals the drop in balances, and equals what the settles answered.
  const sums = await target.rows<{ account_id: string; granted: number; charged: number; total: number }>(`
    SELECT account_id, SUM(CASE WHEN entry = 'grant' THEN amount ELSE 0 END) AS granted,
      -SUM(CASE WHEN entry = 'charge' THEN amount ELSE 0 END) AS charged, SUM(amount) AS total
    FROM ledger GROUP BY account_id`);
  const balances = await target.rows<{ account_id: string; balance: number }>('SELECT account_id, SUM(balance) AS balance FROM grants GROUP BY account_id');
  for (const acc of Object.values(model.s.accounts)) {
    const s = sums.find((x) => x.account_id === acc.id) ?? { granted: 0, charged: 0, total: 0 };
    const balance = balances.find((x) => x.account_id === acc.id)?.balance ?? 0;
    if (s.total !== balance) fail('the sum of charges equals the drop in balances', `${acc.name}: ledger sums to ${s.total}, balances to ${balance}`);
    if (s.charged !== acc.charged || s.granted !== acc.granted) {
      fail('the sum of charges equals the drop in balances',
        `${acc.name}: ledger granted ${s.granted} and charged ${s.charged}; the simulation granted ${acc.granted} and was charged ${acc.charged}`);
    }
    // Usage counts what the ledger charged: over all time, every settled completion of the account.
    const usage = await target.stores[0]!.usage({ accountId: acc.id, from: new Date(0), until: new Date(now + 86_400_000) });
    const used = usage.reduce((sum, row) => sum + row.credits, 0);
    if (used !== acc.charged) fail('usage equals what the ledger charged', `${acc.name}: usage ${used}, charged ${acc.charged}`);
    model.expire(acc, now);
    const owned = model.owned(acc);
    if (acc.granted - acc.charged - acc.expired !== owned) fail('model bookkeeping', `${acc.name}: ${JSON.stringify(acc)}`);
  }
}

export async function verifyClean(store: Store): Promise<void> {
  const report = await store.verifyLedger();
  if (report.disagreements.length > 0) fail('ledger verify', JSON.stringify(report.disagreements.slice(0, 5)));
}
