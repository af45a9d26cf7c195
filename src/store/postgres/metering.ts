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
 * Inside, every change is a conditional UPDATE that the CHECK constraints back,
 * and every change of a balance appends a ledger entry. The sweeper closes each
 * lapsed reservation in its own transaction, picked with `SKIP LOCKED`, so
 * several instances share the work and close each exactly once.
 */
import type { Pool, PoolClient, QueryResult, QueryResultRow } from 'pg';
import type { Clock } from '../../clock.js';
import { utcDay } from '../../clock.js';
import { admitRequest } from '../../metering/rate-limit.js';
import type { Delivered, LeaseRenewal, ReservationPlanner, ReserveOutcome, ReserveRequest, SettleRequest, SettleResult } from '../types.js';
import { inTransaction } from './database.js';

interface GrantRow {
  id: string;
  balance: number;
  held: number;
}

/** A grant a settlement may charge: its own hold on it, plus what is free on it if unexpired. */
interface PayableRow {
  id: string;
  own: number;
  free: number;
}

interface KeyRow {
  lim: number | null;
  held: number;
  spent: number;
  rpm: number | null;
  tat: number;
}

interface ReservationRow {
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
}

/** Earned first, soonest expiry first; then purchased, oldest first. */
const SPENDING_ORDER = `ORDER BY (g.kind = 'purchased'), g.expires_at, g.created_at, g.id`;
const RESERVATION_COLUMNS = `id, account_id, key_id, model, amount, day, state, charged, idempotency_key,
  delivered_credits, delivered_prompt_tokens, delivered_completion_tokens, routed_model`;
const SWEEP_BATCH = 500;

/** Every statement metering runs, by name; each is prepared once per connection. */
const SQL = {
  lockGrants: `SELECT id FROM grants WHERE account_id = $1 AND balance > 0 ORDER BY id FOR NO KEY UPDATE`,
  lockKey: `SELECT k.daily_credit_limit AS lim, k.held, COALESCE(d.spent, 0) AS spent, k.rate_limit_rpm AS rpm, k.rate_tat AS tat
    FROM api_keys k LEFT JOIN key_days d ON d.key_id = k.id AND d.day = $2 WHERE k.id = $1 FOR NO KEY UPDATE OF k`,
  reservation: `SELECT ${RESERVATION_COLUMNS} FROM reservations WHERE id = $1 FOR NO KEY UPDATE`,
  nextLapsed: `SELECT ${RESERVATION_COLUMNS} FROM reservations WHERE state = 'held' AND lease_until < $1
    ORDER BY lease_until LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`,
  lapsed: `SELECT id, balance, held FROM grants
    WHERE account_id = $1 AND id = ANY($3::text[]) AND kind = 'earned' AND expires_at <= $2 AND balance > held ORDER BY id`,
  lapsedAccounts: `SELECT DISTINCT account_id FROM grants
    WHERE kind = 'earned' AND expires_at <= $1 AND balance > held LIMIT 1000`,
  expire: `UPDATE grants SET balance = held WHERE id = $1 AND balance = $2 AND held = $3`,
  spendable: `SELECT g.id, g.balance, g.held FROM grants g
    WHERE g.account_id = $1 AND g.id = ANY($3::text[]) AND g.balance > g.held AND (g.expires_at IS NULL OR g.expires_at > $2)
    ${SPENDING_ORDER}`,
  // The cap: today's settled credits plus every hold in flight plus the new one.
  holdKey: `UPDATE api_keys SET held = held + $2::bigint WHERE id = $1 AND (daily_credit_limit IS NULL
    OR held + $2::bigint + COALESCE((SELECT spent FROM key_days WHERE key_id = $1 AND day = $3), 0) <= daily_credit_limit)`,
  paceKey: `UPDATE api_keys SET rate_tat = $2 WHERE id = $1 AND rate_tat = $3`,
  unholdKey: `UPDATE api_keys SET held = held - $2::bigint WHERE id = $1 AND held >= $2::bigint`,
  ensureKeyDay: `INSERT INTO key_days (key_id, day) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
  spendKeyDay: `UPDATE key_days SET spent = spent + $3::bigint WHERE key_id = $1 AND day = $2
    AND ($4::bigint IS NULL OR spent + $3::bigint + (SELECT held FROM api_keys WHERE id = $1) <= $4::bigint)`,
  insertReservation: `INSERT INTO reservations
    (id, account_id, key_id, model, amount, day, state, lease_until, created_at, idempotency_key)
    VALUES ($1, $2, $3, $4, $5, $6, 'held', $7, $8, $9)`,
  // An Idempotency-Key claim lives as long as the reservation it took.
  linkClaim: `UPDATE idempotency_keys SET reservation_id = $3 WHERE account_id = $1 AND key = $2 AND state = 'running'`,
  storeResponse: `UPDATE idempotency_keys SET state = 'done', status = $4, body = $5
    WHERE account_id = $1 AND key = $2 AND reservation_id = $3 AND state = 'running'`,
  dropClaim: `DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND reservation_id = $3 AND state = 'running'`,
  // Takes the hold on one grant and records it, or (nothing free enough) changes nothing.
  hold: `WITH taken AS (UPDATE grants SET held = held + $3::bigint WHERE id = $2 AND balance - held >= $3::bigint RETURNING id)
    INSERT INTO reservation_holds (reservation_id, grant_id, amount) SELECT $1, id, $3::bigint FROM taken`,
  holds: `SELECT grant_id AS id, amount FROM reservation_holds WHERE reservation_id = $1 ORDER BY grant_id`,
  // The reservation's own holds (expired grants too: a hold taken before expiry may still
  // be settled from) and every unexpired grant's free credits, in spending order.
  payable: `SELECT g.id, COALESCE(h.amount, 0) AS own,
      CASE WHEN g.expires_at IS NULL OR g.expires_at > $3 THEN g.balance - g.held ELSE 0 END AS free
    FROM grants g LEFT JOIN reservation_holds h ON h.grant_id = g.id AND h.reservation_id = $1 AND $4::boolean
    WHERE g.account_id = $2 AND g.id = ANY($5::text[])
      AND (h.amount IS NOT NULL OR ((g.expires_at IS NULL OR g.expires_at > $3) AND g.balance > g.held))
    ${SPENDING_ORDER}`,
  // Lifts the hold and charges; beyond the hold only from free credits of an unexpired grant.
  charge: `UPDATE grants SET balance = balance - $2::bigint, held = held - $3::bigint
    WHERE id = $1 AND held >= $3::bigint AND balance - held + $3::bigint >= $2::bigint
      AND ($2::bigint <= $3::bigint OR expires_at IS NULL OR expires_at > $4)`,
  releaseHold: `UPDATE grants SET held = held - $2::bigint WHERE id = $1 AND held >= $2::bigint`,
  closeReservation: `UPDATE reservations SET state = $2, charged = $3, closed_at = $4 WHERE id = $1 AND state = $5`,
  renew: `UPDATE reservations SET lease_until = $2 WHERE id = $1 AND state = 'held'`,
  // What was delivered only grows: a late renewal never lowers what a sweeper would charge.
  renewDelivered: `UPDATE reservations SET lease_until = $2,
      delivered_credits = GREATEST(delivered_credits, $3), delivered_prompt_tokens = GREATEST(delivered_prompt_tokens, $4),
      delivered_completion_tokens = GREATEST(delivered_completion_tokens, $5), routed_model = $6
    WHERE id = $1 AND state = 'held'`,
  // Both renewals above for many reservations at once, column by column (delivered figures null when nothing was).
  renewMany: `UPDATE reservations r SET lease_until = v.lease,
      delivered_credits = GREATEST(r.delivered_credits, COALESCE(v.credits, 0)),
      delivered_prompt_tokens = GREATEST(r.delivered_prompt_tokens, COALESCE(v.prompt, 0)),
      delivered_completion_tokens = GREATEST(r.delivered_completion_tokens, COALESCE(v.completion, 0)),
      routed_model = COALESCE(v.routed, r.routed_model)
    FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::text[])
      AS v(id, lease, credits, prompt, completion, routed)
    WHERE r.id = v.id AND r.state = 'held'
    RETURNING r.id`,
  ledger: `INSERT INTO ledger (account_id, grant_id, entry, amount, reservation_id, shortfall, created_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7)`,
  insertCompletion: `INSERT INTO completions
    (reservation_id, account_id, key_id, model, routed_model, prompt_tokens, completion_tokens, credits, settled_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
  owned: `SELECT COALESCE(SUM(CASE WHEN expires_at IS NULL OR expires_at > $2 THEN balance ELSE held END), 0) AS owned
    FROM grants WHERE account_id = $1`,
} as const;

type Statement = keyof typeof SQL;

function run<R extends QueryResultRow = QueryResultRow>(client: PoolClient | Pool, name: Statement, values: unknown[]): Promise<QueryResult<R>> {
  return client.query<R>({ name: `metering_${name}`, text: SQL[name], values });
}

export class PostgresMetering {
  constructor(private readonly pool: Pool, private readonly clock: Clock) {}

  reserve(request: ReserveRequest, plan: ReservationPlanner): Promise<ReserveOutcome> {
    return inTransaction(this.pool, async (c): Promise<ReserveOutcome> => {
      const now = this.clock.now().getTime();
      const locked = await this.lockGrants(c, request.accountId);
      const day = utcDay(new Date(now));
      const key = await this.lockKey(c, request.keyId, day);
      await this.expireLapsed(c, request.accountId, locked, now);
      const grants = (await run<GrantRow>(c, 'spendable', [request.accountId, now, locked])).rows;
      const available = grants.reduce((sum, g) => sum + g.balance - g.held, 0);
      // The rate limit first; a request counts against it only once its reservation is taken.
      const pace = admitRequest(key.rpm, key.tat, now);
      if (!pace.ok) return { ok: false, reason: 'rate_limit', message: pace.message, retryAfterSeconds: pace.retryAfterSeconds };
      const capRemaining = key.lim === null ? null : Math.max(0, key.lim - key.spent - key.held);

      const decision = plan({ available, capRemaining });
      if (!decision.ok) return decision;
      if (key.rpm !== null) mustChange(await run(c, 'paceKey', [request.keyId, pace.tat, key.tat]), 'rate limit');

      await run(c, 'insertReservation', [
        request.reservationId, request.accountId, request.keyId, request.model, decision.amount, day,
        now + request.leaseMs, now, request.idempotencyKey ?? null,
      ]);
      let left = decision.amount;
      for (const g of grants) {
        if (left === 0) break;
        const take = Math.min(left, g.balance - g.held);
        mustChange(await run(c, 'hold', [request.reservationId, g.id, take]), 'hold on grant');
        left -= take;
      }
      if (left !== 0) throw new Error(`reservation of ${decision.amount} exceeds the ${available} credits available`);
      mustChange(await run(c, 'holdKey', [request.keyId, decision.amount, day]), 'daily cap hold');
      if (request.idempotencyKey !== undefined) {
        await run(c, 'linkClaim', [request.accountId, request.idempotencyKey, request.reservationId]);
      }
      return decision;
    });
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
      const res = (await run<ReservationRow>(c, 'reservation', [request.reservationId])).rows[0];
      if (!res) throw new Error(`no reservation ${request.reservationId}`);
      return this.settleOpen(c, res, request, now);
    });
  }

  release(reservationId: string): Promise<void> {
    return inTransaction(this.pool, async (c) => {
      const res = (await run<ReservationRow>(c, 'reservation', [reservationId])).rows[0];
      if (res) await this.releaseHeld(c, res, this.clock.now().getTime(), 'released');
    });
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
        const res = (await run<ReservationRow>(c, 'nextLapsed', [now])).rows[0];
        if (!res) return false;
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
        return this.expireLapsed(c, accountId, await this.lockGrants(c, accountId), now);
      });
    }
    return expired;
  }

  async owned(client: PoolClient | Pool, accountId: string, now: number): Promise<number> {
    return (await run<{ owned: number }>(client, 'owned', [accountId, now])).rows[0]?.owned ?? 0;
  }

  /** Charges an open (held or lapsed) reservation, locked by the caller, and closes it; a closed one answers what it was charged. */
  private async settleOpen(c: PoolClient, res: ReservationRow, request: SettleRequest, now: number): Promise<SettleResult> {
    if (res.state === 'settled' || res.state === 'released') {
      return { charged: res.charged, shortfall: 0, balanceRemaining: await this.owned(c, res.account_id, now) };
    }
    const locked = await this.lockGrants(c, res.account_id);
    const today = utcDay(new Date(now));
    const key = await this.lockKey(c, res.key_id, today);
    // A reservation whose lease lapsed while its request still ran was let go by a
    // sweeper and holds nothing any more: it is settled late, from what is free now.
    const holding = res.state === 'held';
    const ownHold = holding ? res.amount : 0;
    const want = Math.max(0, request.credits);
    const capRoom = key.lim === null ? Infinity : key.lim - key.spent - (key.held - ownHold);
    let left = Math.max(0, Math.min(want, capRoom));

    // Charge in spending order over the reservation's own holds and the credits free now:
    // earned credits freed since the reservation was taken go before purchased ones it held,
    // and what the upstream counted beyond the estimate comes from free credits.
    const charges: Array<{ grant: string; amount: number }> = [];
    const payable = (await run<PayableRow>(c, 'payable', [res.id, res.account_id, now, holding, locked])).rows;
    for (const g of payable) {
      const charge = Math.min(left, g.own + g.free);
      if (charge === 0 && g.own === 0) continue;
      mustChange(await run(c, 'charge', [g.id, charge, g.own, now]), 'charge on grant');
      if (charge > 0) charges.push({ grant: g.id, amount: charge });
      left -= charge;
    }
    const charged = charges.reduce((sum, ch) => sum + ch.amount, 0);
    const shortfall = want - charged;
    await this.writeCharges(c, res, charges, shortfall, now);
    await this.expireLapsed(c, res.account_id, locked, now);

    if (holding) mustChange(await run(c, 'unholdKey', [res.key_id, res.amount]), 'daily cap unhold');
    await run(c, 'ensureKeyDay', [res.key_id, today]);
    mustChange(await run(c, 'spendKeyDay', [res.key_id, today, charged, key.lim]), 'daily cap spend');
    mustChange(await run(c, 'closeReservation', [res.id, 'settled', charged, now, res.state]), 'close reservation');
    await run(c, 'insertCompletion', [
      res.id, res.account_id, res.key_id, res.model, request.routedModel, request.promptTokens, request.completionTokens, charged, now,
    ]);
    const result = { charged, shortfall, balanceRemaining: await this.owned(c, res.account_id, now) };
    if (request.respond && res.idempotency_key !== null) {
      const response = request.respond(result);
      await run(c, 'storeResponse', [res.account_id, res.idempotency_key, res.id, response.status, JSON.stringify(response.body)]);
    }
    return result;
  }

  /** Lets go of a held reservation, locked by the caller, at no charge. */
  private async releaseHeld(c: PoolClient, res: ReservationRow, now: number, state: 'released' | 'lapsed'): Promise<boolean> {
    if (res.state !== 'held') return false;
    const locked = await this.lockGrants(c, res.account_id);
    mustChange(await run(c, 'closeReservation', [res.id, state, 0, now, 'held']), 'close reservation');
    for (const h of (await run<{ id: string; amount: number }>(c, 'holds', [res.id])).rows) {
      mustChange(await run(c, 'releaseHold', [h.id, h.amount]), 'release hold');
    }
    mustChange(await run(c, 'unholdKey', [res.key_id, res.amount]), 'daily cap release');
    // Nothing was charged: a retry under the same Idempotency-Key may run (a lapsed claim is judged stale by its reservation).
    if (state === 'released' && res.idempotency_key !== null) {
      await run(c, 'dropClaim', [res.account_id, res.idempotency_key, res.id]);
    }
    await this.expireLapsed(c, res.account_id, locked, now);
    return true;
  }

  /**
   * Locks the account's grants that hold anything, in id order, and answers their ids: the
   * transaction then reads and changes only these (a grant committed meanwhile waits for the next
   * one), so it never takes a row lock out of order. A grant at balance 0 can never change again.
   */
  private async lockGrants(c: PoolClient, accountId: string): Promise<string[]> {
    return (await run<{ id: string }>(c, 'lockGrants', [accountId])).rows.map((g) => g.id);
  }

  private async lockKey(c: PoolClient, keyId: string, day: string): Promise<KeyRow> {
    const key = (await run<KeyRow>(c, 'lockKey', [keyId, day])).rows[0];
    if (!key) throw new Error(`no api key ${keyId}`);
    return key;
  }

  private async writeCharges(
    c: PoolClient, res: ReservationRow, charges: Array<{ grant: string; amount: number }>, shortfall: number, now: number,
  ): Promise<void> {
    for (const [i, ch] of charges.entries()) {
      const last = i === charges.length - 1;
      await run(c, 'ledger', [res.account_id, ch.grant, 'charge', -ch.amount, res.id, last ? shortfall : 0, now]);
    }
    if (charges.length === 0 && shortfall > 0) {
      await run(c, 'ledger', [res.account_id, null, 'shortfall', 0, res.id, shortfall, now]);
    }
  }

  /** Earned credits past their expiry are gone, all but what holds taken before it still keep. Only among the locked grants. */
  private async expireLapsed(c: PoolClient, accountId: string, locked: string[], now: number): Promise<number> {
    const lapsed = (await run<GrantRow>(c, 'lapsed', [accountId, now, locked])).rows;
    for (const g of lapsed) {
      mustChange(await run(c, 'expire', [g.id, g.balance, g.held]), 'expire grant');
      await run(c, 'ledger', [accountId, g.id, 'expire', g.held - g.balance, null, 0, now]);
    }
    return lapsed.length;
  }
}

function mustChange(result: QueryResult, what: string): void {
  if (result.rowCount !== 1) throw new Error(`${what}: the guarded update matched no row`);
}
