/**
 * The reference model: what the contract says the ledger must hold after each
 * operation, computed from the contract's rules (Metering, Daily credit cap,
 * API keys) and nothing of the stores' code. Per account: earned grants with
 * their expiry, purchased credits (one pool: they never expire, so which
 * purchased grant pays is not observable in any balance), holds per
 * reservation, per key its holds in flight, what it settled each UTC day and
 * its rate-limit state, and Idempotency-Key claims.
 */
import type { Op, SettleSize } from './ops.js';
import { utcDay } from '../src/clock.js';

const MINUTE_MS = 60_000;
const DEFAULT_MAX_OUTPUT = 4096;
const CLAIM_UNRESERVED_MS = 60_000;
const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000;
/** The key of the purchased pool in a reservation's holds. */
export const PURCHASED = '*purchased';

export interface MGrant { id: string; expiresAt: number; balance: number; held: number }
export interface MClaim { fp: string; state: 'running' | 'done'; createdAt: number; res: string | null; body: string | null }
export interface MAccount {
  name: string; id: string;
  /** Earned grants in spending order (soonest expiry first). */
  earned: MGrant[];
  purchased: { balance: number; held: number };
  granted: number; charged: number; expired: number;
  claims: Record<string, MClaim>;
}
export interface MKey {
  name: string; id: string; account: string; lim: number | null; rpm: number | null;
  /** Rate limit: the earliest time the next request is due (GCRA's theoretical arrival time). */
  tat: number;
  /** What the key settled on the current UTC day only (earlier days never change again; the store's are checked on their own). */
  held: number; spent: Record<string, number>; revoked: boolean;
}
export type ResState = 'held' | 'settled' | 'released' | 'lapsed';
export interface MRes {
  name: string; account: string; key: string; amount: number; holds: Record<string, number>;
  state: ResState; charged: number; leaseUntil: number; delivered: number; idem: string | null;
}

/** What an operation answered, normalised so that the store's answer and the model's compare as JSON. */
export type Outcome = Record<string, unknown>;

export interface ModelState {
  accounts: Record<string, MAccount>;
  keys: Record<string, MKey>;
  res: Record<string, MRes>;
}

export class Model {
  /**
   * @param archive Closed (settled, released) and lapsed reservations, shared by
   * every trial copy of the model instead of copied; only a lapsed one changes
   * again (a late settle), and that settle works on a copy of it.
   */
  constructor(public s: ModelState = { accounts: {}, keys: {}, res: {} }, readonly archive = new Map<string, MRes>()) {}

  clone(): Model {
    return new Model(structuredClone(this.s), this.archive);
  }

  /** Moves closed reservations to the shared archive, and drops empty grants (on the accepted model only). */
  archiveClosed(): void {
    // A grant with nothing left and nothing held never holds credits again.
    for (const acc of Object.values(this.s.accounts)) {
      if (acc.earned.some((g) => g.balance === 0 && g.held === 0)) acc.earned = acc.earned.filter((g) => g.balance > 0 || g.held > 0);
    }
    for (const r of Object.values(this.s.res)) {
      if (r.state !== 'held') {
        this.archive.set(r.name, r);
        delete this.s.res[r.name];
      }
    }
  }

  /** Reservations of `account` still held or lapsed, and the named ones. */
  reservations(account: string, names: string[]): MRes[] {
    const open = Object.values(this.s.res).filter((r) => r.account === account && (r.state === 'held' || names.includes(r.name)));
    const closed = names.map((n) => this.archive.get(n)).filter((r): r is MRes => r !== undefined && r.account === account);
    return [...open, ...closed];
  }

  account(name: string): MAccount | undefined { return this.s.accounts[name]; }
  key(name: string): MKey | undefined { return this.s.keys[name]; }
  reservation(name: string): MRes | undefined { return this.s.res[name] ?? this.archive.get(name); }

  /** The account an operation touches, or null when it names something that does not exist (the op is skipped). */
  accountOf(op: Op): string | null {
    switch (op.t) {
      case 'account': return this.s.accounts[op.a] ? null : op.a;
      case 'key': case 'grant': case 'claim': return this.s.accounts[op.a] ? op.a : null;
      case 'reserve': return this.reservation(op.r) ? null : (this.s.keys[op.k]?.account ?? null);
      case 'revoke': return this.s.keys[op.k]?.account ?? null;
      case 'settle': case 'release': case 'renew': return this.reservation(op.r)?.account ?? null;
      default: return null;
    }
  }

  addAccount(name: string, id: string): void {
    this.s.accounts[name] = {
      name, id, earned: [], purchased: { balance: 0, held: 0 }, granted: 0, charged: 0, expired: 0, claims: {},
    };
  }

  addKey(name: string, id: string, account: string, lim: number | null, rpm: number | null): void {
    this.s.keys[name] = { name, id, account, lim, rpm, tat: 0, held: 0, spent: {}, revoked: false };
  }

  grant(account: string, id: string, amount: number, expiresAt: number | null, now: number): void {
    const acc = this.s.accounts[account]!;
    this.expire(acc, now);
    acc.granted += amount;
    if (expiresAt === null) {
      acc.purchased.balance += amount;
      return;
    }
    acc.earned.push({ id, expiresAt, balance: amount, held: 0 });
    acc.earned.sort((x, y) => x.expiresAt - y.expiresAt);
  }

  /** Earned credits past their expiry are gone, all but what holds taken before it keep. */
  expire(acc: MAccount, now: number): void {
    for (const g of acc.earned) {
      if (g.expiresAt <= now && g.balance > g.held) {
        acc.expired += g.balance - g.held;
        g.balance = g.held;
      }
    }
  }

  /** Owned credits: settled balances, expired earned grants counting only what their holds keep. */
  owned(acc: MAccount): number {
    return acc.earned.reduce((sum, g) => sum + g.balance, 0) + acc.purchased.balance;
  }

  balances(account: string, now: number): Outcome {
    const acc = this.s.accounts[account]!;
    this.expire(acc, now);
    const live = acc.earned.filter((g) => g.expiresAt > now && g.balance > 0);
    return {
      earned: acc.earned.reduce((sum, g) => sum + g.balance, 0),
      purchased: acc.purchased.balance,
      earnedExpiresAt: live.length > 0 ? Math.min(...live.map((g) => g.expiresAt)) : null,
      reserved: acc.earned.reduce((sum, g) => sum + g.held, 0) + acc.purchased.held,
    };
  }

  /** The gateway's reservation: a revoked key is refused by authentication, before the store. */
  reserve(op: Extract<Op, { t: 'reserve' }>, now: number): Outcome {
    const key = this.s.keys[op.k]!;
    const acc = this.s.accounts[key.account]!;
    if (key.revoked) return { ok: false, reason: 'revoked' };
    this.expire(acc, now);
    const available = acc.earned.reduce((sum, g) => sum + (g.expiresAt > now ? g.balance - g.held : 0), 0)
      + acc.purchased.balance - acc.purchased.held;

    // rate_limit_rpm: `rpm` requests in any minute, a burst of up to `rpm` at once; only taken reservations count.
    let tat = key.tat;
    if (key.rpm !== null) {
      const interval = MINUTE_MS / key.rpm;
      const due = Math.max(key.tat, now);
      if (due - now > MINUTE_MS - interval) {
        return { ok: false, reason: 'rate_limit', retryAfterSeconds: Math.max(1, Math.ceil((due - (MINUTE_MS - interval) - now) / 1000)) };
      }
      tat = due + interval;
    }
    const today = utcDay(new Date(now));
    const capLeft = key.lim === null ? null : Math.max(0, key.lim - (key.spent[today] ?? 0) - key.held);
    const decision = plan(op, available, capLeft);
    if (!decision.ok) return { ok: false, reason: decision.reason };
    key.tat = tat;

    const holds: Record<string, number> = {};
    let left = decision.amount;
    for (const g of acc.earned) {
      if (g.expiresAt <= now || left === 0) continue;
      const take = Math.min(left, g.balance - g.held);
      if (take > 0) { g.held += take; holds[g.id] = take; left -= take; }
    }
    if (left > 0) { acc.purchased.held += left; holds[PURCHASED] = left; }
    key.held += decision.amount;
    this.s.res[op.r] = {
      name: op.r, account: acc.name, key: key.name, amount: decision.amount, holds, state: 'held', charged: 0,
      leaseUntil: now + op.leaseMs, delivered: 0, idem: op.idem,
    };
    if (op.idem !== null) {
      const claim = acc.claims[op.idem];
      if (claim && claim.state === 'running') claim.res = op.r;
    }
    return decision;
  }

  /** Credits a settle asks for, from the reservation's amount. */
  credits(r: string, size: SettleSize): number {
    const amount = this.reservation(r)!.amount;
    if (size.rel === 'at') return amount;
    return size.rel === 'below' ? Math.max(0, amount - size.n) : amount + size.n;
  }

  settle(r: string, credits: number, respond: boolean, now: number): Outcome {
    const archived = this.s.res[r] ? undefined : this.archive.get(r);
    if (archived?.state === 'lapsed') this.s.res[r] = structuredClone(archived);
    const res = this.reservation(r)!;
    const acc = this.s.accounts[res.account]!;
    const key = this.s.keys[res.key]!;
    this.expire(acc, now);
    if (res.state === 'settled' || res.state === 'released') {
      return { charged: res.charged, shortfall: 0, balanceRemaining: this.owned(acc) };
    }
    // A lapsed reservation holds nothing any more: it pays from what is free now.
    const holding = res.state === 'held';
    const today = utcDay(new Date(now));
    const othersHeld = key.held - (holding ? res.amount : 0);
    const capRoom = key.lim === null ? Infinity : key.lim - (key.spent[today] ?? 0) - othersHeld;
    let left = Math.max(0, Math.min(credits, capRoom));
    // Spending order over the reservation's own holds and every unexpired grant's free credits.
    for (const g of acc.earned) {
      const own = holding ? res.holds[g.id] ?? 0 : 0;
      const free = g.expiresAt > now ? g.balance - g.held : 0;
      const charge = Math.min(left, own + free);
      g.balance -= charge;
      g.held -= own;
      left -= charge;
    }
    const ownP = holding ? res.holds[PURCHASED] ?? 0 : 0;
    const chargeP = Math.min(left, ownP + acc.purchased.balance - acc.purchased.held);
    acc.purchased.balance -= chargeP;
    acc.purchased.held -= ownP;
    left -= chargeP;
    const charged = Math.max(0, Math.min(credits, capRoom)) - left;
    this.expire(acc, now);
    if (holding) key.held -= res.amount;
    key.spent = { [today]: (key.spent[today] ?? 0) + charged };
    res.state = 'settled';
    res.charged = charged;
    acc.charged += charged;
    const result = { charged, shortfall: credits - charged, balanceRemaining: this.owned(acc) };
    if (respond && res.idem !== null) {
      const claim = acc.claims[res.idem];
      if (claim && claim.res === r && claim.state === 'running') {
        claim.state = 'done';
        claim.body = JSON.stringify(result);
      }
    }
    return result;
  }

  release(r: string, now: number, state: 'released' | 'lapsed' = 'released'): boolean {
    const res = this.reservation(r)!;
    if (res.state !== 'held') return false;
    const acc = this.s.accounts[res.account]!;
    res.state = state;
    if (state === 'released' && res.idem !== null) {
      const claim = acc.claims[res.idem];
      if (claim && claim.res === r && claim.state === 'running') delete acc.claims[res.idem];
    }
    for (const g of acc.earned) g.held -= res.holds[g.id] ?? 0;
    acc.purchased.held -= res.holds[PURCHASED] ?? 0;
    this.s.keys[res.key]!.held -= res.amount;
    this.expire(acc, now);
    return true;
  }

  renew(r: string, leaseMs: number, deliveredPct: number | null, now: number): boolean {
    const res = this.reservation(r)!;
    if (res.state !== 'held') return false;
    res.leaseUntil = now + leaseMs;
    if (deliveredPct !== null) res.delivered = Math.max(res.delivered, delivered(res.amount, deliveredPct));
    return true;
  }

  /** Reservations a sweep at `now` closes, in the order they were taken. */
  lapsed(now: number): string[] {
    return Object.values(this.s.res).filter((r) => r.state === 'held' && r.leaseUntil < now).map((r) => r.name);
  }

  /** Closes one lapsed reservation: settled for what it reported delivered, else released. */
  sweepOne(r: string, now: number): void {
    const res = this.reservation(r)!;
    if (res.delivered === 0) this.release(r, now, 'lapsed');
    else this.settle(r, res.delivered, false, now);
  }

  claim(account: string, key: string, fp: string, now: number): Outcome {
    const acc = this.s.accounts[account]!;
    const c = acc.claims[key];
    const seen = c ? this.judge(c, now) : 'stale';
    if (c && seen !== 'stale') {
      if (c.fp !== fp) return { state: 'mismatch' };
      if (seen === 'done') return { state: 'done', body: c.body };
      return { state: seen };
    }
    acc.claims[key] = { fp, state: 'running', createdAt: now, res: null, body: null };
    return { state: 'claimed' };
  }

  private judge(c: MClaim, now: number): 'stale' | 'done' | 'running' | 'interrupted' {
    if (c.createdAt < now - IDEMPOTENCY_WINDOW_MS) return 'stale';
    if (c.state === 'done') return 'done';
    if (c.res === null) return c.createdAt >= now - CLAIM_UNRESERVED_MS ? 'running' : 'stale';
    const state = this.reservation(c.res)?.state;
    if (state === 'held') return 'running';
    return state === 'settled' ? 'interrupted' : 'stale';
  }

  /** Forgets every claim made more than 24 h ago; answers how many. */
  prune(now: number): number {
    let pruned = 0;
    for (const acc of Object.values(this.s.accounts)) {
      for (const [key, c] of Object.entries(acc.claims)) {
        if (c.createdAt < now - IDEMPOTENCY_WINDOW_MS) { delete acc.claims[key]; pruned++; }
      }
    }
    return pruned;
  }

  revoke(k: string): boolean {
    const key = this.s.keys[k]!;
    if (key.revoked) return false;
    key.revoked = true;
    return true;
  }
}

export function delivered(amount: number, pct: number): number {
  return Math.floor((amount * pct) / 100);
}

/**
 * The contract's reservation rule. Explicit max_tokens: reserved whole, or 429
 * past the cap / 402 past the credits. Otherwise the output is the smallest of
 * 4096, the context left, and what the credits and the cap afford.
 */
type Plan = { ok: true; amount: number; maxOutput: number } | { ok: false; reason: string };

function plan(op: Extract<Op, { t: 'reserve' }>, available: number, capLeft: number | null): Plan {
  const [inPrice, outPrice] = op.price;
  const cost = (output: number) => Math.ceil((op.prompt * inPrice + output * outPrice) / 1000);
  const fits = (budget: number) => {
    const rest = budget * 1000 - op.prompt * inPrice;
    return rest < 0 ? -1 : Math.floor(rest / outPrice);
  };
  const refuse = (reason: string): Plan => ({ ok: false, reason });
  if (op.maxTokens !== null) {
    const amount = cost(op.maxTokens);
    if (capLeft !== null && amount > capLeft) return refuse('daily_cap');
    if (amount > available) return refuse('insufficient_credits');
    return { ok: true, amount, maxOutput: op.maxTokens };
  }
  const byCap = capLeft === null ? Infinity : fits(capLeft);
  if (byCap < 1) return refuse('daily_cap');
  const byCredits = fits(available);
  if (byCredits < 1) return refuse('insufficient_credits');
  const maxOutput = Math.min(DEFAULT_MAX_OUTPUT, op.context - op.prompt, byCredits, byCap);
  return { ok: true, amount: cost(maxOutput), maxOutput };
}
