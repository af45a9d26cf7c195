/**
 * The operations a simulation runs, as plain JSON (so that a failing sequence
 * can be printed and replayed), and the seeded generator that makes them.
 * Entities are named, not numbered, so that removing an operation while
 * shrinking never makes a later one refer to something else; an operation on
 * a name that does not exist (its creation was removed, or refused) is skipped.
 * Amounts that depend on a reservation (what a settle charges, what a renewal
 * reports delivered) are relative to the amount the reservation took.
 */
import { Prng } from './prng.js';

export type SettleSize = { rel: 'below' | 'at' | 'above'; n: number };

export type Op =
  | { t: 'account'; a: string }
  | { t: 'key'; k: string; a: string; lim: number | null; rpm: number | null }
  | { t: 'grant'; a: string; kind: 'earned' | 'purchased'; amount: number; ttlMs: number | null }
  | {
    t: 'reserve'; r: string; k: string; i: number; prompt: number; maxTokens: number | null;
    price: [number, number]; context: number; leaseMs: number; idem: string | null;
  }
  | { t: 'settle'; r: string; i: number; size: SettleSize; respond: boolean }
  | { t: 'release'; r: string; i: number }
  | { t: 'renew'; r: string; i: number; leaseMs: number; deliveredPct: number | null }
  | { t: 'sweep'; i: number }
  /** Deletes Idempotency-Key records past their 24 h. */
  | { t: 'prune'; i: number }
  | { t: 'advance'; ms: number }
  | { t: 'claim'; a: string; key: string; fp: string; i: number }
  | { t: 'revoke'; k: string; i: number }
  /** Run together (Promise.all) on their instances; checked against every serial order. */
  | { t: 'batch'; ops: Op[] }
  /** A second connection holds the write lock (SQLite) or the account's rows (PostgreSQL) for `ms` while `op` runs. */
  | { t: 'contend'; ms: number; op: Op };

export type OpName = Op['t'];

export const START = Date.parse('2026-11-21T22:00:00Z');
const DAY_MS = 86_400_000;
const LEASE_MS = 30_000;
/**
 * Unrevoked keys an account may have: a new key beyond it replaces none, it is not made.
 * Keys are never deleted, so without a bound a long run's accounts pile up thousands of them
 * and every step's snapshot grows with them; with it, new keys come only after revocations.
 */
const LIVE_KEYS_PER_ACCOUNT = 8;
/** Divisors of a minute, so that GCRA's emission interval is a whole number of milliseconds. */
const RPMS = [1, 1, 2, 2, 3, 4, 5, 6, 10, 12, 20, 30, 60];
const PRICES: Array<[number, number]> = [[1000, 1000], [500, 2000], [2000, 3000], [250, 750]];

interface GenKey { k: string; a: string; rpm: number | null; revoked: boolean }

/** Generates `count` operations (a batch counts as one) from `seed`, with `instances` instances. */
export function generate(seed: number, count: number, instances: number): Op[] {
  return new Generator(seed, instances).run(count);
}

class Generator {
  private readonly rnd: Prng;
  private now = START;
  private readonly accounts: string[] = [];
  private readonly keys: GenKey[] = [];
  private readonly expiries: number[] = [];
  private open: string[] = [];
  private closed: string[] = [];
  private next = 0;
  private readonly ops: Op[] = [];

  constructor(seed: number, private readonly instances: number) {
    this.rnd = new Prng(seed);
  }

  run(count: number): Op[] {
    for (let a = 0; a < 3; a++) this.newAccount();
    while (this.ops.length < count) this.step();
    return this.ops.slice(0, count);
  }

  private name(prefix: string): string {
    return `${prefix}${this.next++}`;
  }

  private inst(): number {
    return this.rnd.int(0, this.instances - 1);
  }

  private newAccount(): void {
    const a = this.name('a');
    this.accounts.push(a);
    this.ops.push({ t: 'account', a });
    this.ops.push(this.grant(a, 'purchased'));
    this.ops.push(this.grant(a, 'earned'));
    this.ops.push(this.grant(a, 'earned'));
    const keys = this.rnd.int(1, 3);
    for (let i = 0; i < keys; i++) this.newKey(a);
  }

  private newKey(a: string): void {
    if (this.keys.filter((key) => key.a === a && !key.revoked).length >= LIVE_KEYS_PER_ACCOUNT) return;
    const k = this.name('k');
    const lim = this.rnd.chance(0.5) ? null : this.rnd.int(0, 40) * 10;
    const rpm = this.rnd.chance(0.6) ? null : this.rnd.pick(RPMS);
    this.keys.push({ k, a, rpm, revoked: false });
    this.ops.push({ t: 'key', k, a, lim, rpm });
  }

  private grant(a: string, kind: 'earned' | 'purchased'): Op {
    if (kind === 'purchased') return { t: 'grant', a, kind, amount: this.rnd.int(1, 800), ttlMs: null };
    // Mostly expiries a few minutes to two days away; the clock will pass many of them.
    const ttlMs = this.rnd.chance(0.3) ? this.rnd.int(1, 600_000) : this.rnd.int(600_000, 2 * DAY_MS);
    this.expiries.push(this.now + ttlMs);
    return { t: 'grant', a, kind, amount: this.rnd.int(1, 300), ttlMs };
  }

  /** Mostly a key still in use; now and then any key, a revoked one included. */
  private anyKey(): GenKey {
    const live = this.keys.filter((key) => !key.revoked);
    return this.rnd.pick(live.length > 0 && this.rnd.chance(0.9) ? live : this.keys);
  }

  private reserve(key: GenKey = this.anyKey()): Extract<Op, { t: 'reserve' }> {
    const r = this.name('r');
    this.open.push(r);
    if (this.open.length > 16) this.closed.push(...this.open.splice(0, 1));
    const price = this.rnd.pick(PRICES);
    const prompt = this.rnd.int(1, 60);
    return {
      t: 'reserve', r, k: key.k, i: this.inst(), prompt, price,
      maxTokens: this.rnd.chance(0.5) ? this.rnd.int(1, 120) : null,
      context: prompt + this.rnd.int(1, 200),
      leaseMs: LEASE_MS,
      idem: this.rnd.chance(0.25) ? `idem-${this.rnd.int(0, 3)}` : null,
    };
  }

  /** An open reservation (closing it), or now and then one already closed. */
  private target(close: boolean): string | null {
    if (this.open.length === 0 || (this.closed.length > 0 && this.rnd.chance(0.1))) {
      return this.closed.length > 0 ? this.rnd.pick(this.closed) : null;
    }
    const at = this.rnd.int(0, this.open.length - 1);
    const r = this.open[at]!;
    if (close) {
      this.open.splice(at, 1);
      this.closed.push(r);
      if (this.closed.length > 50) this.closed.shift();
    }
    return r;
  }

  private settle(r: string): Op {
    const rel = this.rnd.weighted({ below: 5, at: 2, above: 2 });
    return { t: 'settle', r, i: this.inst(), size: { rel, n: this.rnd.int(0, 30) }, respond: this.rnd.chance(0.7) };
  }

  private advance(ms: number): void {
    this.now += ms;
    this.ops.push({ t: 'advance', ms });
  }

  /** One operation, or a short scenario of several. */
  private step(): void {
    const kind = this.rnd.weighted({
      reserve: 30, settle: 18, release: 5, renew: 5, duplicate: 3, lapse: 2, sweep: 3, advance: 12,
      grant: 5, claim: 5, burst: 1, prune: 0.3, revoke: 0.15, key: 0.5, account: 0.1, batch: 6, contend: 1,
    });
    switch (kind) {
      case 'reserve': {
        const op = this.reserve();
        // A request with an Idempotency-Key claims it first, then reserves under it.
        if (op.idem !== null && this.rnd.chance(0.7)) {
          const a = this.keys.find((k) => k.k === op.k)!.a;
          this.ops.push({ t: 'claim', a, key: op.idem, fp: this.rnd.pick(['fp-a', 'fp-b']), i: op.i });
        }
        this.ops.push(op);
        return;
      }
      case 'settle': case 'duplicate': {
        const r = this.target(true);
        if (r === null) return;
        this.ops.push(this.settle(r));
        if (kind === 'duplicate') this.ops.push(this.settle(r));
        return;
      }
      case 'release': {
        const r = this.target(true);
        if (r !== null) this.ops.push({ t: 'release', r, i: this.inst() });
        return;
      }
      case 'renew': {
        const r = this.target(false);
        if (r !== null) {
          this.ops.push({
            t: 'renew', r, i: this.inst(), leaseMs: LEASE_MS, deliveredPct: this.rnd.chance(0.5) ? this.rnd.int(0, 100) : null,
          });
        }
        return;
      }
      case 'lapse': {
        // The lease runs out, a sweeper lets the hold go, then the request settles late.
        const r = this.target(true);
        if (r === null) return;
        this.advance(LEASE_MS + this.rnd.int(1, 5000));
        this.ops.push({ t: 'sweep', i: this.inst() });
        this.ops.push(this.settle(r));
        return;
      }
      case 'burst': {
        // Requests from one key in quick succession, across instances: its rate_limit_rpm decides.
        const limited = this.keys.filter((key) => key.rpm !== null && !key.revoked);
        const key = limited.length > 0 && this.rnd.chance(0.8) ? this.rnd.pick(limited) : this.anyKey();
        const n = this.rnd.int(2, 8);
        for (let j = 0; j < n; j++) {
          const op = this.reserve(key);
          this.ops.push(op);
          if (this.rnd.chance(0.3)) this.advance(this.rnd.int(1, 4000));
        }
        return;
      }
      case 'sweep': this.ops.push({ t: 'sweep', i: this.inst() }); return;
      case 'prune': this.ops.push({ t: 'prune', i: this.inst() }); return;
      case 'advance': this.advance(this.jump()); return;
      case 'grant': this.ops.push(this.grant(this.rnd.pick(this.accounts), this.rnd.chance(0.5) ? 'earned' : 'purchased')); return;
      case 'claim':
        this.ops.push({
          t: 'claim', a: this.rnd.pick(this.accounts), key: `idem-${this.rnd.int(0, 3)}`, fp: this.rnd.pick(['fp-a', 'fp-b']), i: this.inst(),
        });
        return;
      case 'revoke': {
        const key = this.anyKey();
        key.revoked = true;
        this.ops.push({ t: 'revoke', k: key.k, i: this.inst() });
        return;
      }
      case 'key': this.newKey(this.rnd.pick(this.accounts)); return;
      case 'account': if (this.accounts.length < 6) this.newAccount(); return;
      case 'batch': this.ops.push(this.batch()); return;
      case 'contend': {
        const r = this.open.length > 0 && this.rnd.chance(0.5) ? this.target(true) : null;
        this.ops.push({ t: 'contend', ms: this.rnd.int(5, 60), op: r === null ? this.reserve() : this.settle(r) });
        return;
      }
    }
  }

  /** How far the clock moves: mostly a little, sometimes past midnight, an expiry, or a day. */
  private jump(): number {
    const how = this.rnd.weighted({ small: 60, lease: 15, midnight: 10, expiry: 10, day: 5 });
    if (how === 'small') return this.rnd.int(1, 3000);
    if (how === 'lease') return this.rnd.int(3000, 40_000);
    if (how === 'midnight') {
      const next = Math.floor(this.now / DAY_MS) * DAY_MS + DAY_MS;
      return next - this.now + this.rnd.int(-1, 2000) + (next - this.now <= 1 ? 2 : 0);
    }
    if (how === 'expiry') {
      // Past expiries are dropped: a long run keeps only those still ahead.
      const ahead = this.expiries.filter((e) => e > this.now);
      this.expiries.splice(0, this.expiries.length, ...ahead);
      if (ahead.length > 0) return ahead.reduce((a, b) => Math.min(a, b)) - this.now + this.rnd.int(0, 1);
      return this.rnd.int(1, 3000);
    }
    return this.rnd.int(DAY_MS, DAY_MS + 3_600_000);
  }

  private batch(): Op {
    if (this.rnd.chance(0.15)) return { t: 'batch', ops: [{ t: 'sweep', i: 0 }, { t: 'sweep', i: this.instances - 1 }] };
    const size = this.rnd.int(2, 4);
    const ops: Op[] = [];
    const used = new Set<string>();
    const fresh = new Set<string>();
    const kinds: Array<'reserve' | 'settle' | 'release' | 'renew' | 'claim' | 'same'> = [];
    for (let n = 0; n < size; n++) kinds.push(this.rnd.weighted({ reserve: 5, settle: 3, release: 1, renew: 1, claim: 1, same: 1 }));
    // Reservations taken in this batch are not targets of it: their names come last.
    kinds.sort((x, y) => Number(x === 'reserve') - Number(y === 'reserve'));
    for (const kind of kinds) {
      const r = kind === 'settle' || kind === 'release' || kind === 'renew' || kind === 'same' ? this.target(kind !== 'renew') : null;
      if (r !== null && fresh.has(r)) continue;
      if (kind === 'reserve' || (r === null && kind !== 'claim')) {
        const op = this.reserve();
        fresh.add(op.r);
        ops.push(op);
      } else if (kind === 'claim') {
        ops.push({ t: 'claim', a: this.rnd.pick(this.accounts), key: `idem-${this.rnd.int(0, 3)}`, fp: this.rnd.pick(['fp-a', 'fp-b']), i: this.inst() });
      } else if (r !== null && kind === 'same') {
        // The same reservation settled twice at once, from two instances: one charge.
        ops.push(this.settle(r), this.settle(r));
      } else if (r !== null && !used.has(r)) {
        used.add(r);
        if (kind === 'settle') ops.push(this.settle(r));
        else if (kind === 'release') ops.push({ t: 'release', r, i: this.inst() });
        else ops.push({ t: 'renew', r, i: this.inst(), leaseMs: LEASE_MS, deliveredPct: this.rnd.int(0, 100) });
      }
    }
    return { t: 'batch', ops: ops.slice(0, 4) };
  }
}

/** The operation's name for the counts; a batch counts its members too. */
export function opNames(op: Op): OpName[] {
  if (op.t === 'batch') return ['batch', ...op.ops.flatMap(opNames)];
  if (op.t === 'contend') return ['contend', ...opNames(op.op)];
  return [op.t];
}
