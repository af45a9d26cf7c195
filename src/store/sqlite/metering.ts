/**
 * Reserve, settle and release on SQLite. Each is one `BEGIN IMMEDIATE`
 * transaction, so writers from every process are serialised by the database;
 * inside, every change is a conditional UPDATE that the CHECK constraints back,
 * and every change of a balance appends a ledger entry.
 */
import type { Database } from 'better-sqlite3';
import type { Clock } from '../../clock.js';
import { utcDay } from '../../clock.js';
import { admitRequest } from '../../metering/rate-limit.js';
import type {
  Delivered, LeaseRenewal, LedgerDisagreement, LedgerReport, ProgressListener, ReservationPlanner, ReserveOutcome, ReserveRequest, SettleRequest, SettleResult,
} from '../types.js';

/** How many rows `verifyLedger` checks between two calls of its progress listener. */
const PROGRESS_EVERY = 500;

interface GrantRow {
  id: string;
  balance: number;
  held: number;
}

interface HoldRow extends GrantRow {
  hold: number;
  expires_at: number | null;
}

/** A grant a settlement may charge: its own hold on it, plus what is free on it if unexpired. */
interface PayableRow {
  id: string;
  own: number;
  free: number;
}

interface KeyCapRow {
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

/** Every statement metering runs, prepared once; a typo is a compile error. */
function prepareStatements(db: Database) {
  return {
    lapsed: db.prepare(`SELECT id, balance, held FROM grants
      WHERE account_id = ? AND balance > 0 AND kind = 'earned' AND expires_at <= ? AND balance > held`),
    lapsedAll: db.prepare(`SELECT id, account_id, balance, held FROM grants
      WHERE kind = 'earned' AND expires_at <= ? AND balance > held LIMIT 1000`),
    expire: db.prepare(`UPDATE grants SET balance = held WHERE id = ? AND balance = ? AND held = ?`),
    spendable: db.prepare(`SELECT g.id, g.balance, g.held FROM grants g
      WHERE g.account_id = ? AND g.balance > 0 AND g.balance > g.held AND (g.expires_at IS NULL OR g.expires_at > ?) ${SPENDING_ORDER}`),
    keyCap: db.prepare(`SELECT k.daily_credit_limit AS lim, k.held, COALESCE(d.spent, 0) AS spent, k.rate_limit_rpm AS rpm, k.rate_tat AS tat
      FROM api_keys k LEFT JOIN key_days d ON d.key_id = k.id AND d.day = ? WHERE k.id = ?`),
    // The cap: today's settled credits plus every hold in flight plus the new one.
    holdKey: db.prepare(`UPDATE api_keys SET held = held + @amount WHERE id = @key AND (daily_credit_limit IS NULL
      OR held + @amount + COALESCE((SELECT spent FROM key_days WHERE key_id = @key AND day = @day), 0) <= daily_credit_limit)`),
    paceKey: db.prepare(`UPDATE api_keys SET rate_tat = @tat WHERE id = @key AND rate_tat = @was`),
    unholdKey: db.prepare(`UPDATE api_keys SET held = held - @amount WHERE id = @key AND held >= @amount`),
    ensureKeyDay: db.prepare(`INSERT OR IGNORE INTO key_days (key_id, day) VALUES (?, ?)`),
    spendKeyDay: db.prepare(`UPDATE key_days SET spent = spent + @charged WHERE key_id = @key AND day = @day
      AND (@lim IS NULL OR spent + @charged + (SELECT held FROM api_keys WHERE id = @key) <= @lim)`),
    insertReservation: db.prepare(`INSERT INTO reservations
      (id, account_id, key_id, model, amount, day, state, lease_until, created_at, idempotency_key)
      VALUES (@id, @account, @key, @model, @amount, @day, 'held', @lease, @now, @idempotencyKey)`),
    // An Idempotency-Key claim lives as long as the reservation it took.
    linkClaim: db.prepare(`UPDATE idempotency_keys SET reservation_id = @reservation
      WHERE account_id = @account AND key = @key AND state = 'running'`),
    storeResponse: db.prepare(`UPDATE idempotency_keys SET state = 'done', status = @status, body = @body
      WHERE account_id = @account AND key = @key AND reservation_id = @reservation AND state = 'running'`),
    dropClaim: db.prepare(`DELETE FROM idempotency_keys
      WHERE account_id = @account AND key = @key AND reservation_id = @reservation AND state = 'running'`),
    hold: db.prepare(`UPDATE grants SET held = held + @amount WHERE id = @grant AND balance - held >= @amount`),
    insertHold: db.prepare(`INSERT INTO reservation_holds (reservation_id, grant_id, amount) VALUES (?, ?, ?)`),
    reservation: db.prepare(`SELECT id, account_id, key_id, model, amount, day, state, charged, idempotency_key,
        delivered_credits, delivered_prompt_tokens, delivered_completion_tokens, routed_model
      FROM reservations WHERE id = ?`),
    holds: db.prepare(`SELECT g.id, g.balance, g.held, g.expires_at, h.amount AS hold FROM reservation_holds h
      JOIN grants g ON g.id = h.grant_id WHERE h.reservation_id = ? ${SPENDING_ORDER}`),
    // The reservation's own holds (expired grants too: a hold taken before expiry may still
    // be settled from) and every unexpired grant's free credits, in spending order.
    payable: db.prepare(`SELECT g.id, COALESCE(h.amount, 0) AS own,
        CASE WHEN g.expires_at IS NULL OR g.expires_at > @now THEN g.balance - g.held ELSE 0 END AS free
      FROM grants g LEFT JOIN reservation_holds h ON h.grant_id = g.id AND h.reservation_id = @reservation AND @holding = 1
      WHERE g.account_id = @account AND g.balance > 0
        AND (h.amount IS NOT NULL OR ((g.expires_at IS NULL OR g.expires_at > @now) AND g.balance > g.held))
      ${SPENDING_ORDER}`),
    // Lifts the hold and charges; beyond the hold only from free credits of an unexpired grant.
    charge: db.prepare(`UPDATE grants SET balance = balance - @charge, held = held - @own
      WHERE id = @grant AND held >= @own AND balance - held + @own >= @charge
        AND (@charge <= @own OR expires_at IS NULL OR expires_at > @now)`),
    releaseHold: db.prepare(`UPDATE grants SET held = held - @hold WHERE id = @grant AND held >= @hold`),
    closeReservation: db.prepare(`UPDATE reservations SET state = @state, charged = @charged, closed_at = @now
      WHERE id = @id AND state = @from`),
    renew: db.prepare(`UPDATE reservations SET lease_until = ? WHERE id = ? AND state = 'held'`),
    // What was delivered only grows: a late renewal never lowers what a sweeper would charge.
    renewDelivered: db.prepare(`UPDATE reservations SET lease_until = @lease,
        delivered_credits = MAX(delivered_credits, @credits), delivered_prompt_tokens = MAX(delivered_prompt_tokens, @prompt),
        delivered_completion_tokens = MAX(delivered_completion_tokens, @completion), routed_model = @routed
      WHERE id = @id AND state = 'held'`),
    // Both renewals above for many reservations at once, from a JSON array of
    // [id, lease_until, credits, prompt, completion, routed] (the last four null when nothing was delivered).
    renewMany: db.prepare(`UPDATE reservations SET lease_until = v.lease,
        delivered_credits = MAX(delivered_credits, COALESCE(v.credits, 0)),
        delivered_prompt_tokens = MAX(delivered_prompt_tokens, COALESCE(v.prompt, 0)),
        delivered_completion_tokens = MAX(delivered_completion_tokens, COALESCE(v.completion, 0)),
        routed_model = COALESCE(v.routed, routed_model)
      FROM (SELECT value ->> 0 AS id, value ->> 1 AS lease, value ->> 2 AS credits, value ->> 3 AS prompt,
          value ->> 4 AS completion, value ->> 5 AS routed FROM json_each(?)) AS v
      WHERE reservations.id = v.id AND reservations.state = 'held'
      RETURNING reservations.id`),
    leaseLapsed: db.prepare(`SELECT id FROM reservations WHERE state = 'held' AND lease_until < ? LIMIT 500`),
    ledger: db.prepare(`INSERT INTO ledger (account_id, grant_id, entry, amount, reservation_id, shortfall, created_at)
      VALUES (@account, @grant, @entry, @amount, @reservation, @shortfall, @now)`),
    insertCompletion: db.prepare(`INSERT INTO completions
      (reservation_id, account_id, key_id, model, routed_model, prompt_tokens, completion_tokens, credits, settled_at)
      VALUES (@id, @account, @key, @model, @routed, @prompt, @completion, @credits, @now)`),
    owned: db.prepare(`SELECT COALESCE(SUM(CASE WHEN expires_at IS NULL OR expires_at > ? THEN balance ELSE held END), 0) AS owned
      FROM grants WHERE account_id = ? AND balance > 0`),
  };
}

export class SqliteMetering {
  private readonly q: ReturnType<typeof prepareStatements>;

  constructor(private readonly db: Database, private readonly clock: Clock) {
    this.q = prepareStatements(db);
  }

  reserve(request: ReserveRequest, plan: ReservationPlanner): ReserveOutcome {
    return this.db.transaction((): ReserveOutcome => {
      const now = this.clock.now().getTime();
      this.expireLapsed(request.accountId, now);
      const grants = this.q.spendable.all(request.accountId, now) as GrantRow[];
      const available = grants.reduce((sum, g) => sum + g.balance - g.held, 0);
      const day = utcDay(new Date(now));
      const key = this.q.keyCap.get(day, request.keyId) as KeyCapRow;
      // The rate limit first; a request counts against it only once its reservation is taken.
      const pace = admitRequest(key.rpm, key.tat, now);
      if (!pace.ok) return { ok: false, reason: 'rate_limit', message: pace.message, retryAfterSeconds: pace.retryAfterSeconds };
      const capRemaining = key.lim === null ? null : Math.max(0, key.lim - key.spent - key.held);

      const decision = plan({ available, capRemaining });
      if (!decision.ok) return decision;
      if (key.rpm !== null) mustChange(this.q.paceKey.run({ tat: pace.tat, key: request.keyId, was: key.tat }), 'rate limit');

      this.q.insertReservation.run({
        id: request.reservationId, account: request.accountId, key: request.keyId, model: request.model,
        amount: decision.amount, day, lease: now + request.leaseMs, now, idempotencyKey: request.idempotencyKey ?? null,
      });
      if (request.idempotencyKey !== undefined) {
        this.q.linkClaim.run({ reservation: request.reservationId, account: request.accountId, key: request.idempotencyKey });
      }
      let left = decision.amount;
      for (const g of grants) {
        if (left === 0) break;
        const take = Math.min(left, g.balance - g.held);
        mustChange(this.q.hold.run({ amount: take, grant: g.id }), 'hold on grant');
        this.q.insertHold.run(request.reservationId, g.id, take);
        left -= take;
      }
      if (left !== 0) throw new Error(`reservation of ${decision.amount} exceeds the ${available} credits available`);
      mustChange(this.q.holdKey.run({ amount: decision.amount, key: request.keyId, day }), 'daily cap hold');
      return decision;
    }).immediate();
  }

  renewLease(reservationId: string, leaseMs: number, delivered?: Delivered | null): boolean {
    const lease = this.clock.now().getTime() + leaseMs;
    if (!delivered) return this.q.renew.run(lease, reservationId).changes === 1;
    return this.q.renewDelivered.run({
      lease, id: reservationId, credits: delivered.credits, prompt: delivered.promptTokens,
      completion: delivered.completionTokens, routed: delivered.routedModel,
    }).changes === 1;
  }

  /** Renews every lease given in one statement; answers the ids still held. */
  renewLeases(renewals: readonly LeaseRenewal[]): Set<string> {
    if (renewals.length === 0) return new Set();
    const now = this.clock.now().getTime();
    const rows = renewals.map(({ reservationId, leaseMs, delivered }) => [
      reservationId, now + leaseMs,
      delivered?.credits ?? null, delivered?.promptTokens ?? null, delivered?.completionTokens ?? null, delivered?.routedModel ?? null,
    ]);
    const renewed = this.q.renewMany.all(JSON.stringify(rows)) as Array<{ id: string }>;
    return new Set(renewed.map((r) => r.id));
  }

  settle(request: SettleRequest): SettleResult {
    return this.db.transaction((): SettleResult => {
      const now = this.clock.now().getTime();
      const res = this.q.reservation.get(request.reservationId) as ReservationRow | undefined;
      if (!res) throw new Error(`no reservation ${request.reservationId}`);
      return this.settleOpen(res, request, now);
    }).immediate();
  }

  /** Charges an open (held or lapsed) reservation and closes it; a closed one answers what it was charged. */
  private settleOpen(res: ReservationRow, request: SettleRequest, now: number): SettleResult {
    {
      if (res.state === 'settled' || res.state === 'released') {
        return { charged: res.charged, shortfall: 0, balanceRemaining: this.owned(res.account_id, now) };
      }
      // A reservation whose lease lapsed while its request still ran was let go by a
      // sweeper and holds nothing any more: it is settled late, from what is free now.
      const holding = res.state === 'held';
      const ownHold = holding ? res.amount : 0;
      const want = Math.max(0, request.credits);
      const today = utcDay(new Date(now));
      const key = this.q.keyCap.get(today, res.key_id) as KeyCapRow;
      const capRoom = key.lim === null ? Infinity : key.lim - key.spent - (key.held - ownHold);
      let left = Math.max(0, Math.min(want, capRoom));

      // Charge in spending order over the reservation's own holds and the credits free now:
      // earned credits freed since the reservation was taken go before purchased ones it held,
      // and what the upstream counted beyond the estimate comes from free credits.
      const charges: Array<{ grant: string; amount: number }> = [];
      const payable = this.q.payable.all({ reservation: res.id, account: res.account_id, now, holding: holding ? 1 : 0 }) as PayableRow[];
      for (const g of payable) {
        const charge = Math.min(left, g.own + g.free);
        if (charge === 0 && g.own === 0) continue;
        mustChange(this.q.charge.run({ charge, own: g.own, grant: g.id, now }), 'charge on grant');
        if (charge > 0) charges.push({ grant: g.id, amount: charge });
        left -= charge;
      }
      const charged = charges.reduce((sum, c) => sum + c.amount, 0);
      const shortfall = want - charged;
      this.writeCharges(res, charges, shortfall, now);
      this.expireLapsed(res.account_id, now);

      if (holding) mustChange(this.q.unholdKey.run({ amount: res.amount, key: res.key_id }), 'daily cap unhold');
      this.q.ensureKeyDay.run(res.key_id, today);
      mustChange(this.q.spendKeyDay.run({ charged, key: res.key_id, day: today, lim: key.lim }), 'daily cap spend');
      mustChange(this.q.closeReservation.run({ state: 'settled', from: res.state, charged, now, id: res.id }), 'close reservation');
      this.q.insertCompletion.run({
        id: res.id, account: res.account_id, key: res.key_id, model: res.model, routed: request.routedModel,
        prompt: request.promptTokens, completion: request.completionTokens, credits: charged, now,
      });
      const result = { charged, shortfall, balanceRemaining: this.owned(res.account_id, now) };
      if (request.respond && res.idempotency_key !== null) {
        const response = request.respond(result);
        this.q.storeResponse.run({
          status: response.status, body: JSON.stringify(response.body),
          account: res.account_id, key: res.idempotency_key, reservation: res.id,
        });
      }
      return result;
    }
  }

  release(reservationId: string): void {
    this.db.transaction(() => this.releaseHeld(reservationId, this.clock.now().getTime(), 'released')).immediate();
  }

  /**
   * Crashed processes leave held reservations behind; any instance closes them,
   * each once: settled for what they recorded as delivered (content that reached
   * a client is paid for), else released.
   */
  releaseExpiredLeases(): number {
    return this.db.transaction((): number => {
      const now = this.clock.now().getTime();
      const ids = this.q.leaseLapsed.all(now) as Array<{ id: string }>;
      return ids.filter(({ id }) => {
        const res = this.q.reservation.get(id) as ReservationRow | undefined;
        if (!res || res.state !== 'held') return false;
        if (res.delivered_credits === 0) return this.releaseHeld(id, now, 'lapsed');
        this.settleOpen(res, {
          reservationId: id, credits: res.delivered_credits, promptTokens: res.delivered_prompt_tokens,
          completionTokens: res.delivered_completion_tokens, routedModel: res.routed_model ?? 'unknown',
        }, now);
        return true;
      }).length;
    }).immediate();
  }

  /** Writes the expiry of every lapsed earned grant, for all accounts. */
  expireAllLapsed(): number {
    return this.db.transaction((): number => {
      const now = this.clock.now().getTime();
      const rows = this.q.lapsedAll.all(now) as Array<GrantRow & { account_id: string }>;
      for (const g of rows) this.expireGrant(g.account_id, g, now);
      return rows.length;
    }).immediate();
  }

  /** Row by row (keys, grants, settled reservations), telling `onProgress` every few hundred rows. */
  verifyLedger(onProgress?: ProgressListener): LedgerReport {
    const count = (sql: string) => (this.db.prepare(sql).get() as { n: number }).n;
    const total = count(`SELECT (SELECT COUNT(*) FROM api_keys) + (SELECT COUNT(*) FROM grants)
      + (SELECT COUNT(*) FROM reservations WHERE state = 'settled') AS n`);
    let done = 0;
    const step = () => {
      if (++done % PROGRESS_EVERY === 0) onProgress?.(done, total);
    };
    const disagreements: LedgerDisagreement[] = [];
    const differ = (accountId: string, subject: string, field: LedgerDisagreement['field'], stored: number, recomputed: number) => {
      if (stored !== recomputed) disagreements.push({ accountId, subject, field, stored, recomputed });
    };
    const keys = this.db.prepare(`SELECT k.id, k.account_id, k.held,
        COALESCE((SELECT SUM(r.amount) FROM reservations r WHERE r.key_id = k.id AND r.state = 'held'), 0) AS open_holds
      FROM api_keys k`);
    for (const k of keys.iterate() as Iterable<{ id: string; account_id: string; held: number; open_holds: number }>) {
      differ(k.account_id, k.id, 'held', k.held, k.open_holds);
      step();
    }
    const grants = this.db.prepare(`SELECT g.id, g.account_id, g.balance, g.held,
        COALESCE((SELECT SUM(l.amount) FROM ledger l WHERE l.grant_id = g.id), 0) AS ledger_balance,
        COALESCE((SELECT SUM(h.amount) FROM reservation_holds h JOIN reservations r ON r.id = h.reservation_id
                  WHERE h.grant_id = g.id AND r.state = 'held'), 0) AS open_holds
      FROM grants g`);
    let grantCount = 0;
    for (const g of grants.iterate() as Iterable<GrantRow & { account_id: string; ledger_balance: number; open_holds: number }>) {
      differ(g.account_id, g.id, 'balance', g.balance, g.ledger_balance);
      differ(g.account_id, g.id, 'held', g.held, g.open_holds);
      grantCount++;
      step();
    }
    const settled = this.db.prepare(`SELECT r.id, r.account_id, r.charged,
        COALESCE((SELECT -SUM(l.amount) FROM ledger l WHERE l.reservation_id = r.id AND l.entry = 'charge'), 0) AS ledger_charged
      FROM reservations r WHERE r.state = 'settled'`);
    for (const r of settled.iterate() as Iterable<{ id: string; account_id: string; charged: number; ledger_charged: number }>) {
      differ(r.account_id, r.id, 'charged', r.charged, r.ledger_charged);
      step();
    }
    onProgress?.(total, total);
    return {
      accounts: count('SELECT COUNT(*) AS n FROM accounts'),
      grants: grantCount,
      entries: count('SELECT COUNT(*) AS n FROM ledger'),
      disagreements,
    };
  }

  owned(accountId: string, now: number): number {
    return (this.q.owned.get(now, accountId) as { owned: number }).owned;
  }

  private releaseHeld(reservationId: string, now: number, state: 'released' | 'lapsed'): boolean {
    const res = this.q.reservation.get(reservationId) as ReservationRow | undefined;
    if (!res || this.q.closeReservation.run({ state, from: 'held', charged: 0, now, id: reservationId }).changes !== 1) return false;
    // Nothing was charged: a retry under the same Idempotency-Key may run (a lapsed claim is judged stale by its reservation).
    if (state === 'released' && res.idempotency_key !== null) {
      this.q.dropClaim.run({ account: res.account_id, key: res.idempotency_key, reservation: res.id });
    }
    for (const h of this.q.holds.all(reservationId) as HoldRow[]) {
      mustChange(this.q.releaseHold.run({ hold: h.hold, grant: h.id }), 'release hold');
    }
    mustChange(this.q.unholdKey.run({ amount: res.amount, key: res.key_id }), 'daily cap release');
    this.expireLapsed(res.account_id, now);
    return true;
  }

  private writeCharges(res: ReservationRow, charges: Array<{ grant: string; amount: number }>, shortfall: number, now: number): void {
    const base = { account: res.account_id, reservation: res.id, now };
    charges.forEach((c, i) => {
      const last = i === charges.length - 1;
      this.q.ledger.run({ ...base, grant: c.grant, entry: 'charge', amount: -c.amount, shortfall: last ? shortfall : 0 });
    });
    if (charges.length === 0 && shortfall > 0) {
      this.q.ledger.run({ ...base, grant: null, entry: 'shortfall', amount: 0, shortfall });
    }
  }

  /** Earned credits past their expiry are gone, all but what holds taken before it still keep. */
  private expireLapsed(accountId: string, now: number): void {
    for (const g of this.q.lapsed.all(accountId, now) as GrantRow[]) this.expireGrant(accountId, g, now);
  }

  private expireGrant(accountId: string, g: GrantRow, now: number): void {
    mustChange(this.q.expire.run(g.id, g.balance, g.held), 'expire grant');
    this.q.ledger.run({ account: accountId, grant: g.id, entry: 'expire', amount: g.held - g.balance, reservation: null, shortfall: 0, now });
  }
}

function mustChange(result: { changes: number }, what: string): void {
  if (result.changes !== 1) throw new Error(`${what}: the guarded update matched no row`);
}
