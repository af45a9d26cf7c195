/**
 * Reserve, settle and release on PostgreSQL, with the semantics of
 * src/store/sqlite/metering.ts. Each is one short READ COMMITTED transaction
 * (see database.ts) that touches one account and first locks what it will
 * change, always in this order, so that no two transactions wait on each other
 * in a cycle:
 *
 *   1. the reservation row, when the transaction closes one (settle, release, sweep);
 *   2. the account's grants, `ORDER BY id FOR NO KEY UPDATE`;
 *   3. the key row (its daily cap, holds and rate limit), then its key_days row;
 *   4. the Idempotency-Key claim row.
 *
 * (`NO KEY UPDATE` is the lock an UPDATE takes; unlike `FOR UPDATE` it does not
 * block the foreign-key checks of inserts that merely reference the row.)
 * Each transaction is two statements (metering-sql.ts), two round trips. The
 * first, sent with the BEGIN (database.ts `beginWith`), takes every lock and
 * reads the locked rows; the JS decides (the reservation planner, the spending
 * order); the second, sent with the COMMIT (`commitWith`), writes it all: every
 * change a conditional UPDATE that the CHECK constraints back, every change of
 * a balance with its ledger entry, and a check in SQL that each guarded write
 * changed what the JS expected. A refused reservation commits only the expiries
 * it found. The sweeper closes each lapsed reservation in its own transaction,
 * picked with `SKIP LOCKED`, so several instances share the work and close each
 * exactly once.
 */
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import type { Clock } from '../../clock.js';
import { utcDay } from '../../clock.js';
import { admitRequest } from '../../metering/rate-limit.js';
import type { Delivered, LeaseRenewal, ReservationPlanner, ReserveOutcome, ReserveRequest, SettleRequest, SettleResult } from '../types.js';
import { beginWith, commitWith, inTransaction, type Argument } from './database.js';
import { GrantChanges, unexpired, type LockedGrant } from './grant-changes.js';
import { committing, SQL, STALE_DAY } from './metering-sql.js';

interface FundsRow {
  lim: number | null;
  held: number;
  spent: number;
  rpm: number | null;
  tat: number;
  grants: LockedGrant[];
}

interface OpenRow {
  id: string;
  account_id: string;
  key_id: string;
  model: string;
  amount: number;
  day: string;
  state: 'held' | 'settled' | 'released' | 'lapsed';
  charged: number;
  idempotency_key: string | null;
  delivered_credits: number;
  delivered_prompt_tokens: number;
  delivered_completion_tokens: number;
  routed_model: string | null;
  /** The key's cap and holds and its day's spent; null when the reservation is closed (nothing locked). */
  lim: number | null;
  key_held: number | null;
  spent: number;
  grants: LockedGrant[];
  owned: number;
}

type Counts = Record<string, number>;

const SWEEP_BATCH = 500;

type Statement = keyof typeof SQL;

function run<R extends QueryResultRow = QueryResultRow>(client: PoolClient | Pool, name: Statement, values: unknown[]): Promise<QueryResult<R>> {
  return client.query<R>({ name: `metering_${name}`, text: SQL[name], values });
}

type Writing = 'reserveApply' | 'settleApply' | 'releaseApply';
/** The writing statements sent with their COMMIT, which check their counts themselves; by the number of parameters. */
const COMMITTING: Record<Writing, string> = {
  reserveApply: committing(SQL.reserveApply, 21),
  settleApply: committing(SQL.settleApply, 27),
  releaseApply: committing(SQL.releaseApply, 18),
};

/**
 * Runs a writing statement: with `commit`, sent with the COMMIT and checked in SQL (a cap guard
 * that failed on a stale day raised as `StaleDay`); else checked here. `mustBeOne` names the count
 * that a stale day makes 0.
 */
async function write(
  c: PoolClient, name: Writing, values: Argument[], wanted: Counts, mustBeOne: string | null, commit: boolean,
): Promise<void> {
  if (commit) {
    try {
      await commitWith(c, `metering_commit_${name.toLowerCase()}`, COMMITTING[name], [...values, JSON.stringify(wanted), mustBeOne]);
    } catch (err) {
      if (err instanceof Error && err.message.includes(STALE_DAY)) throw new StaleDay(`${mustBeOne}: the guarded update matched no row`);
      throw err;
    }
    return;
  }
  const counts = (await run<Counts>(c, name, values)).rows[0];
  expect(counts, wanted);
  if (mustBeOne !== null && counts?.[mustBeOne] !== 1) throw new StaleDay(`${mustBeOne}: the guarded update matched no row`);
}

/**
 * A guard on the key's day failed because the row it read was inserted after the locking
 * statement began (the first settlement of a day, committed while this one waited): retried whole.
 */
class StaleDay extends Error {
  readonly code = '40001';
}

export class PostgresMetering {
  constructor(private readonly pool: Pool, private readonly clock: Clock) {}

  reserve(request: ReserveRequest, plan: ReservationPlanner): Promise<ReserveOutcome> {
    return inTransaction(this.pool, async (c): Promise<ReserveOutcome> => {
      const now = this.clock.now().getTime();
      const day = utcDay(new Date(now));
      const key = (await beginWith<FundsRow>(c, 'metering_begin_funds', SQL.funds, [request.accountId, request.keyId, day]))[0];
      if (!key) throw new Error(`no api key ${request.keyId}`);
      const changes = new GrantChanges(key.grants, now);
      changes.expireLapsed();
      const spendable = key.grants.filter((g) => unexpired(g, now) && g.balance > g.held);
      const available = spendable.reduce((sum, g) => sum + g.balance - g.held, 0);
      // The rate limit first; a request counts against it only once its reservation is taken.
      const pace = admitRequest(key.rpm, key.tat, now);
      const capRemaining = (spent: number) => (key.lim === null ? null : Math.max(0, key.lim - spent - key.held));
      let decision: ReserveOutcome = pace.ok
        ? plan({ available, capRemaining: capRemaining(key.spent) })
        : { ok: false, reason: 'rate_limit', message: pace.message, retryAfterSeconds: pace.retryAfterSeconds };
      if (!decision.ok && pace.ok && key.lim !== null && key.spent === 0) {
        // The day's row may be the first settlement of the day, committed while the locking
        // statement waited: READ COMMITTED shows it the key as that settle left it, but not the
        // new row. A taken hold is guarded in SQL (a stale day is retried); a refusal writes
        // nothing, so its reason is decided again on a read of its own (the simulator saw
        // insufficient_credits where the cap was the reason).
        const spent = (await run<{ spent: number }>(c, 'daySpent', [request.keyId, day])).rows[0]?.spent ?? 0;
        if (spent !== 0) decision = plan({ available, capRemaining: capRemaining(spent) });
      }
      if (!decision.ok) {
        if (changes.grantCount > 0) await this.changeGrants(c, request.accountId, now, changes);
        return decision;
      }

      let left = decision.amount;
      for (const g of spendable) {
        if (left === 0) break;
        const take = Math.min(left, g.balance - g.held);
        changes.take(g.id, take);
        left -= take;
      }
      if (left !== 0) throw new Error(`reservation of ${decision.amount} exceeds the ${available} credits available`);
      await write(c, 'reserveApply', [
        request.accountId, now, ...changes.parameters(),
        request.reservationId, request.keyId, request.model, decision.amount, day, now + request.leaseMs,
        request.idempotencyKey ?? null, pace.ok && key.rpm !== null ? pace.tat : null,
      ], { grants: changes.grantCount, entries: changes.entryCount, reservations: 1, holds: spendableTaken(changes, spendable) }, 'keys', true);
      return decision;
    }, null);
  }

  async renewLease(reservationId: string, leaseMs: number, delivered?: Delivered | null): Promise<boolean> {
    const lease = this.clock.now().getTime() + leaseMs;
    const result = delivered
      ? await run(this.pool, 'renewDelivered', [
        reservationId, lease, delivered.credits, delivered.promptTokens, delivered.completionTokens, delivered.routedModel,
      ])
      : await run(this.pool, 'renew', [reservationId, lease]);
    return result.rowCount === 1;
  }

  /** Renews every lease given in one statement; answers the ids still held. */
  async renewLeases(renewals: readonly LeaseRenewal[]): Promise<Set<string>> {
    if (renewals.length === 0) return new Set();
    const now = this.clock.now().getTime();
    const ids: string[] = [];
    const leases: number[] = [];
    const credits: Array<number | null> = [];
    const prompts: Array<number | null> = [];
    const completions: Array<number | null> = [];
    const routed: Array<string | null> = [];
    for (const { reservationId, leaseMs, delivered } of renewals) {
      ids.push(reservationId);
      leases.push(now + leaseMs);
      credits.push(delivered?.credits ?? null);
      prompts.push(delivered?.promptTokens ?? null);
      completions.push(delivered?.completionTokens ?? null);
      routed.push(delivered?.routedModel ?? null);
    }
    const result = await run<{ id: string }>(this.pool, 'renewMany', [ids, leases, credits, prompts, completions, routed]);
    return new Set(result.rows.map((r) => r.id));
  }

  settle(request: SettleRequest): Promise<SettleResult> {
    return inTransaction(this.pool, async (c) => {
      const now = this.clock.now().getTime();
      const res = await this.open(c, request.reservationId, now, true);
      if (!res) throw new Error(`no reservation ${request.reservationId}`);
      return this.settleOpen(c, res, request, now, true);
    }, null);
  }

  release(reservationId: string): Promise<void> {
    return inTransaction(this.pool, async (c) => {
      const now = this.clock.now().getTime();
      const res = await this.open(c, reservationId, now, true);
      if (res) await this.releaseHeld(c, res, now, 'released', true);
    }, null);
  }

  /**
   * Crashed processes leave held reservations behind; any instance closes them,
   * each once, each in its own transaction: settled for what they recorded as
   * delivered (content that reached a client is paid for), else released.
   */
  async releaseExpiredLeases(): Promise<number> {
    const now = this.clock.now().getTime();
    let closed = 0;
    while (closed < SWEEP_BATCH) {
      const found = await inTransaction(this.pool, async (c) => {
        const picked = (await run<{ id: string }>(c, 'nextLapsed', [now])).rows[0];
        if (!picked) return false;
        const res = await this.open(c, picked.id, now);
        if (!res || res.state !== 'held') return true;
        if (res.delivered_credits === 0) {
          await this.releaseHeld(c, res, now, 'lapsed');
        } else {
          await this.settleOpen(c, res, {
            reservationId: res.id, credits: res.delivered_credits, promptTokens: res.delivered_prompt_tokens,
            completionTokens: res.delivered_completion_tokens, routedModel: res.routed_model ?? 'unknown',
          }, now);
        }
        return true;
      });
      if (!found) break;
      closed++;
    }
    return closed;
  }

  /** Writes the expiry of every lapsed earned grant, one account per transaction. */
  async expireAllLapsed(): Promise<number> {
    const now = this.clock.now().getTime();
    const accounts = (await run<{ account_id: string }>(this.pool, 'lapsedAccounts', [now])).rows;
    let expired = 0;
    for (const { account_id: accountId } of accounts) {
      expired += await inTransaction(this.pool, async (c) => {
        const grants = (await run<{ grants: LockedGrant[] }>(c, 'accountGrants', [accountId])).rows[0]?.grants ?? [];
        const changes = new GrantChanges(grants, now);
        const lapsed = changes.expireLapsed();
        if (lapsed > 0) await this.changeGrants(c, accountId, now, changes);
        return lapsed;
      });
    }
    return expired;
  }

  /**
   * Locks a reservation and, while it is open, its account's grants, its key and the key's day;
   * with `begin`, as the statement that opens the transaction.
   */
  private async open(c: PoolClient, reservationId: string, now: number, begin = false): Promise<OpenRow | undefined> {
    const values = [reservationId, utcDay(new Date(now)), now];
    return begin
      ? (await beginWith<OpenRow>(c, 'metering_begin_open', SQL.open, values))[0]
      : (await run<OpenRow>(c, 'open', values)).rows[0];
  }

  /** Charges an open (held or lapsed) reservation, locked by `open`, and closes it; a closed one answers what it was charged. */
  private async settleOpen(c: PoolClient, res: OpenRow, request: SettleRequest, now: number, commit = false): Promise<SettleResult> {
    if (res.state === 'settled' || res.state === 'released') {
      // The statement that found it closed may have waited for the settle that closed it, and READ
      // COMMITTED read the grants (not locked: nothing to change) as they were when it began. A
      // statement of its own sees the balance that settle left (the simulator caught the stale one).
      const owned = (await run<{ owned: number }>(c, 'ownedNow', [res.account_id, now])).rows[0]?.owned ?? 0;
      return { charged: res.charged, shortfall: 0, balanceRemaining: owned };
    }
    const today = utcDay(new Date(now));
    // A reservation whose lease lapsed while its request still ran was let go by a
    // sweeper and holds nothing any more: it is settled late, from what is free now.
    const holding = res.state === 'held';
    const ownHold = holding ? res.amount : 0;
    const want = Math.max(0, request.credits);
    const capRoom = res.lim === null ? Infinity : res.lim - res.spent - ((res.key_held ?? 0) - ownHold);
    let left = Math.max(0, Math.min(want, capRoom));

    // Charge in spending order over the reservation's own holds and the credits free now:
    // earned credits freed since the reservation was taken go before purchased ones it held,
    // and what the upstream counted beyond the estimate comes from free credits.
    const changes = new GrantChanges(res.grants, now);
    const charges: Array<{ grant: string; amount: number }> = [];
    for (const g of res.grants) {
      const own = holding ? g.own : 0;
      const free = unexpired(g, now) ? g.balance - g.held : 0;
      if (own === 0 && free <= 0) continue;
      const charge = Math.min(left, own + free);
      if (charge === 0 && own === 0) continue;
      changes.charge(g.id, own, charge);
      if (charge > 0) charges.push({ grant: g.id, amount: charge });
      left -= charge;
    }
    const charged = charges.reduce((sum, ch) => sum + ch.amount, 0);
    const shortfall = want - charged;
    for (const [i, ch] of charges.entries()) {
      const last = i === charges.length - 1;
      changes.ledger({ grant: ch.grant, entry: 'charge', amount: -ch.amount, reservation: res.id, shortfall: last ? shortfall : 0 });
    }
    if (charges.length === 0 && shortfall > 0) changes.ledger({ grant: null, entry: 'shortfall', amount: 0, reservation: res.id, shortfall });
    changes.expireLapsed();

    const result = { charged, shortfall, balanceRemaining: changes.owned() };
    const response = request.respond && res.idempotency_key !== null ? request.respond(result) : null;
    await write(c, 'settleApply', [
      res.account_id, now, ...changes.parameters(),
      res.id, res.key_id, today, ownHold, charged, res.lim, res.state, res.model, request.routedModel,
      request.promptTokens, request.completionTokens, response ? res.idempotency_key : null,
      response?.status ?? null, response ? JSON.stringify(response.body) : null,
    ], { grants: changes.grantCount, entries: changes.entryCount, keys: ownHold > 0 ? 1 : 0, closed: 1, completions: 1 }, 'days', commit);
    return result;
  }

  /** Lets go of a held reservation, locked by `open`, at no charge. */
  private async releaseHeld(
    c: PoolClient, res: OpenRow, now: number, state: 'released' | 'lapsed', commit = false,
  ): Promise<boolean> {
    if (res.state !== 'held') return false;
    const changes = new GrantChanges(res.grants, now);
    for (const g of res.grants) if (g.own > 0) changes.charge(g.id, g.own, 0);
    changes.expireLapsed();
    // Nothing was charged: a retry under the same Idempotency-Key may run (a lapsed claim is judged stale by its reservation).
    const dropClaim = state === 'released' ? res.idempotency_key : null;
    await write(c, 'releaseApply', [
      res.account_id, now, ...changes.parameters(), res.id, res.key_id, res.amount, state, dropClaim,
    ], { grants: changes.grantCount, entries: changes.entryCount, closed: 1, keys: 1 }, null, commit);
    return true;
  }

  private async changeGrants(c: PoolClient, accountId: string, now: number, changes: GrantChanges): Promise<void> {
    const counts = (await run<Counts>(c, 'changeGrants', [accountId, now, ...changes.parameters()])).rows[0];
    expect(counts, { grants: changes.grantCount, entries: changes.entryCount });
  }
}

/** How many hold rows a reservation writes: one per grant it takes from. */
function spendableTaken(changes: GrantChanges, spendable: LockedGrant[]): number {
  return spendable.filter((g) => changes.after(g).held > g.held).length;
}

/** Every guarded write changed the rows it was meant to, or the transaction rolls back. */
function expect(counts: Counts | undefined, wanted: Counts): void {
  for (const [what, n] of Object.entries(wanted)) {
    if (counts?.[what] !== n) throw new Error(`${what}: the guarded update changed ${counts?.[what] ?? 'no'} rows, not ${n}`);
  }
}
