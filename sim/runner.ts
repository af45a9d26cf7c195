/**
 * Runs a list of operations against K instances of a real Store on a fresh
 * database and against the reference model, step by step, and stops at the
 * first step where they disagree or an invariant breaks.
 *
 * Where the store may choose (the order in which concurrent operations take
 * effect, the order in which a sweep closes lapsed reservations), the model
 * does not guess: it tries every serial order and accepts the store's state
 * if some order explains both the answers and the resulting state exactly;
 * none doing so is a violation.
 */
import type { Store } from '../src/store/types.js';
import { fail, invariants, modelSnapshot, storeSnapshot, verifyClean, ViolationError, type Violation } from './check.js';
import { isSimple, onModel, onStore, setup, type SimpleOp } from './exec.js';
import { Model, type Outcome } from './model.js';
import { opNames, START, type Op } from './ops.js';
import { openTarget, type Backend, type Target } from './target.js';

export interface RunOptions {
  backend: Backend;
  instances: number;
  /** verifyLedger() every this many steps (and at the end). */
  verifyEvery: number;
  /** Whole-database invariants every this many steps (and at the end). */
  checkEvery: number;
  postgresUrl?: string;
  /** Where SQLite's file goes; a tmpfs (/dev/shm) spares the disk's fsync on every commit. */
  sqliteDir?: string;
  wrap?: (store: Store) => Store;
  /** Called every 10,000 steps. */
  onProgress?: (steps: number, elapsedMs: number) => void;
}

export interface RunReport {
  steps: number;
  violation: Violation | null;
  counts: Record<string, number>;
  /** What the store answered, by kind. */
  outcomes: Record<string, number>;
  elapsedMs: number;
}

const MAX_ORDERS = 5040;
/** Steps between two `Target.maintain()` calls (a server's vacuum and statistics). */
const MAINTAIN_EVERY = 10_000;

export async function runOps(ops: Op[], options: RunOptions): Promise<RunReport> {
  const clock = { at: START, now(): Date { return new Date(this.at); } };
  const started = performance.now();
  const target = await openTarget({ ...options, clock });
  const sim = new Simulation(target, clock);
  const counts: Record<string, number> = {};
  let step = 0;
  let violation: Violation | null = null;
  try {
    for (; step < ops.length; step++) {
      const op = ops[step]!;
      for (const name of opNames(op)) counts[name] = (counts[name] ?? 0) + 1;
      await sim.run(op);
      sim.model.archiveClosed();
      if ((step + 1) % options.checkEvery === 0) await invariants(target, sim.model, clock.at);
      if ((step + 1) % options.verifyEvery === 0) await verifyClean(target.stores[0]!);
      if ((step + 1) % MAINTAIN_EVERY === 0) await target.maintain();
      if ((step + 1) % 10_000 === 0) options.onProgress?.(step + 1, performance.now() - started);
    }
    await invariants(target, sim.model, clock.at);
    await verifyClean(target.stores[0]!);
  } catch (err) {
    violation = toViolation(err, step);
  } finally {
    await target.close();
  }
  return { steps: step, violation, counts, outcomes: sim.outcomes, elapsedMs: performance.now() - started };
}

export function toViolation(err: unknown, step: number): Violation {
  if (err instanceof ViolationError) return { step, invariant: err.invariant, detail: err.detail };
  // A store that throws where the gateway expects an answer is a failure too (a guard that matched no row, a constraint).
  return { step, invariant: 'store answered with an error', detail: err instanceof Error ? `${err.name}: ${err.message}` : String(err) };
}

export class Simulation {
  model = new Model();
  readonly outcomes: Record<string, number> = {};

  constructor(readonly target: Target, readonly clock: { at: number }) {}

  async run(op: Op): Promise<void> {
    const now = this.clock.at;
    switch (op.t) {
      case 'advance':
        // Nothing is written when time passes; what changes is what balances() shows (expiries).
        this.clock.at += op.ms;
        return this.compareBalances();
      case 'account': case 'key': case 'grant':
        if (await setup(this.target.stores[0]!, this.model, op, now)) await this.compare([this.model.accountOf(op) ?? op.a], []);
        return;
      case 'prune': {
        const pruned = await this.target.stores[op.i % this.target.stores.length]!.pruneIdempotencyKeys();
        const want = this.model.prune(now);
        if (pruned !== want) fail('answers equal the model', `pruned ${pruned} Idempotency-Key records; the model ${want}`);
        return this.compare(Object.keys(this.model.s.accounts), []);
      }
      case 'contend': {
        if (!isSimple(op.op) || op.op.t === 'sweep') return;
        const inner = op.op;
        const account = this.model.accountOf(inner);
        if (account === null) return;
        const observed = await this.target.contend(op.ms, this.model.account(account)!.id, () => onStore(this.target.stores, this.model, inner));
        return this.explain([inner], [observed]);
      }
      case 'batch': {
        const members = op.ops.filter(isSimple).filter((m) => m.t === 'sweep' || this.model.accountOf(m) !== null);
        if (members.length === 0) return;
        const observed = await Promise.all(members.map((m) => onStore(this.target.stores, this.model, m)));
        return this.explain(members, observed);
      }
      default: {
        if (op.t !== 'sweep' && this.model.accountOf(op) === null) return;
        const observed = await onStore(this.target.stores, this.model, op);
        return this.explain([op], [observed]);
      }
    }
  }

  private async compareBalances(): Promise<void> {
    for (const name of Object.keys(this.model.s.accounts)) {
      const b = await this.target.stores[0]!.balances(this.model.account(name)!.id);
      const seen = { ...b, earnedExpiresAt: b.earnedExpiresAt?.getTime() ?? null };
      const want = this.model.balances(name, this.clock.at);
      if (canonical(seen) !== canonical(want)) fail('store state equals the model', diff({ [name]: want }, { [name]: seen }));
    }
  }

  /** The store's view of `accounts` equals the model's. */
  private async compare(accounts: string[], names: string[]): Promise<void> {
    const now = this.clock.at;
    const seen = await storeSnapshot(this.target, this.target.stores[0]!, this.model, accounts, names, now);
    const want = modelSnapshot(this.model, accounts, names, now);
    if (canonical(seen) !== canonical(want)) fail('store state equals the model', diff(want, seen));
  }

  /** Accepts the first serial order of `ops` under which the model answers `observed` and ends in the store's state. */
  private async explain(ops: SimpleOp[], observed: Outcome[]): Promise<void> {
    const now = this.clock.at;
    ops.forEach((o, i) => this.count(o, observed[i]!));
    if (ops.every((o) => o.t === 'sweep')) return this.explainSweep(observed);
    if (ops.some((o) => o.t === 'sweep')) throw new Error('a batch mixes sweeps with other operations');
    const accounts = [...new Set(ops.map((o) => this.model.accountOf(o)!))];
    const names = ops.flatMap((o) => ('r' in o ? [o.r] : []));
    const seen = canonical(await storeSnapshot(this.target, this.target.stores[0]!, this.model, accounts, names, now));
    let first: { outcomes: Outcome[]; state: string } | null = null;
    for (const order of orders(ops.length)) {
      // One operation has one order: the model itself runs it (a mismatch ends the run anyway).
      const trial = ops.length === 1 ? this.model : this.model.clone();
      const outcomes: Outcome[] = new Array<Outcome>(ops.length);
      for (const i of order) outcomes[i] = onModel(trial, ops[i]!, now);
      const state = canonical(modelSnapshot(trial, accounts, names, now));
      if (canonical(outcomes) === canonical(observed) && state === seen) {
        this.model = trial;
        return;
      }
      first ??= { outcomes, state };
    }
    if (canonical(first!.outcomes) !== canonical(observed)) {
      fail('answers equal the model', `${canonical(ops)}\nmodel: ${canonical(first!.outcomes)}\nstore: ${canonical(observed)}`);
    }
    fail('store state equals the model', diff(JSON.parse(first!.state) as Record<string, unknown>, JSON.parse(seen) as Record<string, unknown>));
  }

  /**
   * One or more sweeps at once: together they close every lapsed reservation
   * exactly once, in an order of the store's choosing; accounts are
   * independent, so each account's order is found on its own.
   */
  private async explainSweep(observed: Outcome[]): Promise<void> {
    const now = this.clock.at;
    const lapsed = this.model.lapsed(now);
    const closed = observed.reduce((sum, o) => sum + (o.closed as number), 0);
    if (closed !== lapsed.length) fail('each lapsed reservation is closed exactly once', `the sweeps closed ${closed}; ${lapsed.length} had lapsed`);
    for (const account of Object.keys(this.model.s.accounts)) {
      const mine = lapsed.filter((r) => this.model.reservation(r)!.account === account);
      if (mine.length === 0) continue;
      const seen = canonical(await storeSnapshot(this.target, this.target.stores[0]!, this.model, [account], mine, now));
      let first: string | null = null;
      let found: Model | null = null;
      for (const order of orders(mine.length)) {
        const trial = this.model.clone();
        for (const i of order) trial.sweepOne(mine[i]!, now);
        const state = canonical(modelSnapshot(trial, [account], mine, now));
        if (state === seen) { found = trial; break; }
        first ??= state;
      }
      if (!found) fail('store state equals the model', `after a sweep: ${diff(JSON.parse(first!) as Record<string, unknown>, JSON.parse(seen) as Record<string, unknown>)}`);
      this.adopt(found, account);
    }
    await this.compare(Object.keys(this.model.s.accounts), []);
  }

  /** Tallies what the store answered: refusals by reason, settles that charged less than asked, claims by state. */
  private count(op: SimpleOp, out: Outcome): void {
    let label: string | null = null;
    if (op.t === 'reserve') label = out.ok ? 'reserve: taken' : `reserve: ${String(out.reason)}`;
    else if (op.t === 'settle') label = (out.shortfall as number) > 0 ? 'settle: short' : 'settle: paid';
    else if (op.t === 'claim') label = `claim: ${String(out.state)}`;
    else if (op.t === 'sweep') label = `sweep: closed ${Math.min(3, out.closed as number)}${(out.closed as number) >= 3 ? '+' : ''}`;
    if (label !== null) this.outcomes[label] = (this.outcomes[label] ?? 0) + 1;
  }

  /** Takes one account's state (its keys and reservations with it) from `from`. */
  private adopt(from: Model, account: string): void {
    const s = this.model.s;
    s.accounts[account] = from.s.accounts[account]!;
    for (const k of Object.values(from.s.keys)) if (k.account === account) s.keys[k.name] = k;
    for (const r of Object.values(from.s.res)) if (r.account === account) s.res[r.name] = r;
  }
}

/** Every order of n items, the given order first; at most MAX_ORDERS of them. */
export function* orders(n: number): Generator<number[]> {
  const items = Array.from({ length: n }, (_, i) => i);
  let produced = 0;
  function* permute(prefix: number[], rest: number[]): Generator<number[]> {
    if (rest.length === 0) { yield prefix; return; }
    for (let i = 0; i < rest.length; i++) {
      yield* permute([...prefix, rest[i]!], [...rest.slice(0, i), ...rest.slice(i + 1)]);
    }
  }
  for (const order of permute([], items)) {
    if (produced++ >= MAX_ORDERS) return;
    yield order;
  }
}

/** JSON with every object's keys sorted, so that the order rows came in never matters. */
export function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v)
    ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    : v));
}

/** The first differing entries of two snapshots, short enough to print. */
function diff(want: Record<string, unknown>, seen: Record<string, unknown>): string {
  const out: string[] = [];
  const walk = (path: string, a: unknown, b: unknown) => {
    if (out.length >= 6 || canonical(a) === canonical(b)) return;
    if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a)) {
      const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
      for (const k of keys) walk(`${path}.${k}`, (a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]);
      return;
    }
    out.push(`${path}: model ${canonical(a)}, store ${canonical(b)}`);
  };
  walk('', want, seen);
  return out.join('; ');
}
