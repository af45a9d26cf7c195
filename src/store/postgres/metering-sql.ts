/**
 * The statements of PostgreSQL metering (metering.ts), two per transaction:
 * one that locks and reads, one that writes.
 *
 * The locking statements take their row locks in the one fixed order, inside a
 * single statement: each MATERIALIZED CTE waits for the previous one through a
 * pseudo-constant condition (`(SELECT count(*) FROM previous) >= 0`), which
 * PostgreSQL evaluates once, before it scans (and locks) anything of its own.
 * A row read `FOR NO KEY UPDATE` is answered in its latest committed version
 * even when the statement had to wait for it, so what they return is current.
 *
 * The writing statements apply, in data-modifying CTEs, what the JS computed
 * from those locked rows: each change is still a conditional UPDATE whose guard
 * is checked in SQL, and each answers how many rows it changed, which is
 * compared with what the JS expected (in SQL when the statement is sent with its
 * COMMIT, see `committing`; else by the caller), or the transaction rolls back.
 * They run in a later statement of the same transaction, so their own reads
 * (the key's day, its holds) see everything committed before the locks were had.
 */

/** Earned first, soonest expiry first; then purchased, oldest first. */
const SPENDING_ORDER = `ORDER BY (g.kind = 'purchased'), g.expires_at, g.created_at, g.id`;

/** The locked grants as JSON, in spending order, with `own`: the hold of reservation `res` on each. */
function grantsJson(holdsOf: string): string {
  return `COALESCE((SELECT json_agg(json_build_object('id', g.id, 'kind', g.kind, 'balance', g.balance, 'held', g.held,
      'expires_at', g.expires_at, 'own', COALESCE(h.amount, 0)) ${SPENDING_ORDER})
    FROM locked_grants g LEFT JOIN reservation_holds h ON h.grant_id = g.id AND h.reservation_id = ${holdsOf}), '[]'::json)`;
}

/** What an account owns at `now`: expired earned credits count only for what is still held on them. */
function owned(account: string, now: string): string {
  return `SELECT COALESCE(SUM(CASE WHEN expires_at IS NULL OR expires_at > ${now} THEN balance ELSE held END), 0)
    FROM grants WHERE account_id = ${account} AND balance > 0`;
}

const GRANT_COLUMNS = `id, kind, balance, held, expires_at, created_at`;
const KEY_COLUMNS = `id, daily_credit_limit AS lim, held, rate_limit_rpm AS rpm, rate_tat AS tat`;
const RESERVATION_COLUMNS = `id, account_id, key_id, model, amount, day, state, charged, idempotency_key,
  delivered_credits, delivered_prompt_tokens, delivered_completion_tokens, routed_model`;

/**
 * Grant changes ($3..$7, one array element per grant) and ledger entries
 * ($8..$12), for account $1 at time $2. A change takes a hold (`take`), lifts
 * this reservation's hold (`own`), charges, and writes a lapsed grant's expiry:
 *   - a hold lifted was there; what is charged or held comes from the grant's free
 *     credits and the hold lifted; beyond that hold, only from an unexpired grant;
 *   - an expiry only on an earned grant past its expiry, and leaves it with its holds only.
 */
const CHANGE_GRANTS = `changed AS (
    UPDATE grants g SET balance = g.balance - u.charge - u.expire, held = g.held + u.take - u.own
    FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) AS u(id, take, own, charge, expire)
    WHERE g.id = u.id AND g.account_id = $1::text AND g.held >= u.own
      AND g.balance - g.held + u.own >= u.charge + u.take
      AND (u.charge + u.take <= u.own OR g.expires_at IS NULL OR g.expires_at > $2::bigint)
      AND (u.expire = 0 OR (g.kind = 'earned' AND g.expires_at <= $2::bigint
        AND g.balance - u.charge - u.expire = g.held + u.take - u.own))
    RETURNING g.id),
  entries AS (
    INSERT INTO ledger (account_id, grant_id, entry, amount, reservation_id, shortfall, created_at)
    SELECT $1::text, e.grant_id, e.entry, e.amount, e.reservation_id, e.shortfall, $2::bigint
    FROM unnest($8::text[], $9::text[], $10::bigint[], $11::text[], $12::bigint[])
      WITH ORDINALITY AS e(grant_id, entry, amount, reservation_id, shortfall, n)
    ORDER BY e.n
    RETURNING 1)`;
const CHANGE_COUNTS = `(SELECT count(*) FROM changed)::int AS grants, (SELECT count(*) FROM entries)::int AS entries`;

export const SQL = {
  /** Reserve, statement 1: account $1's grants by id, then key $2, then its day $3; reads them. */
  funds: `WITH locked_grants AS MATERIALIZED (
      SELECT ${GRANT_COLUMNS} FROM grants WHERE account_id = $1 AND balance > 0 ORDER BY id FOR NO KEY UPDATE),
    locked_key AS MATERIALIZED (
      SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $2 AND (SELECT count(*) FROM locked_grants) >= 0 FOR NO KEY UPDATE),
    locked_day AS MATERIALIZED (
      SELECT spent FROM key_days WHERE key_id = $2 AND day = $3 AND (SELECT count(*) FROM locked_key) >= 0 FOR NO KEY UPDATE)
    SELECT k.lim, k.held, k.rpm, k.tat, COALESCE((SELECT spent FROM locked_day), 0) AS spent, ${grantsJson('NULL')} AS grants
    FROM locked_key k`,

  /**
   * Settle, release and sweep, statement 1: reservation $1, then (while it is open)
   * its account's grants by id, its key and the key's day $2; reads them, and what
   * the account owns (for a reservation closed already, which locks nothing more).
   */
  open: `WITH res AS MATERIALIZED (
      SELECT ${RESERVATION_COLUMNS} FROM reservations WHERE id = $1 FOR NO KEY UPDATE),
    locked_grants AS MATERIALIZED (
      SELECT ${GRANT_COLUMNS} FROM grants WHERE account_id = (SELECT account_id FROM res WHERE state IN ('held', 'lapsed'))
        AND balance > 0 ORDER BY id FOR NO KEY UPDATE),
    locked_key AS MATERIALIZED (
      SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = (SELECT key_id FROM res WHERE state IN ('held', 'lapsed'))
        AND (SELECT count(*) FROM locked_grants) >= 0 FOR NO KEY UPDATE),
    locked_day AS MATERIALIZED (
      SELECT spent FROM key_days WHERE key_id = (SELECT id FROM locked_key) AND day = $2
        AND (SELECT count(*) FROM locked_key) >= 0 FOR NO KEY UPDATE)
    SELECT r.*, k.lim, k.held AS key_held, COALESCE((SELECT spent FROM locked_day), 0) AS spent,
      ${grantsJson('r.id')} AS grants,
      (${owned('r.account_id', '$3')}) AS owned
    FROM res r LEFT JOIN locked_key k ON true`,

  /** Expiry sweep: account $1's grants by id, locked and read. */
  accountGrants: `WITH locked_grants AS MATERIALIZED (
      SELECT ${GRANT_COLUMNS} FROM grants WHERE account_id = $1 AND balance > 0 ORDER BY id FOR NO KEY UPDATE)
    SELECT ${grantsJson('NULL')} AS grants`,

  /** Grant changes and ledger entries only (expiries written by a refused reserve or the sweeper). */
  changeGrants: `WITH ${CHANGE_GRANTS} SELECT ${CHANGE_COUNTS}`,

  /**
   * Reserve, statement 2: the holds, the reservation $13 (key $14, model $15, amount $16,
   * day $17, lease until $18, Idempotency-Key $19), the key's hold under its daily cap and
   * its rate limit's next arrival time $20 (null: no limit), and the claim's link.
   */
  reserveApply: `WITH ${CHANGE_GRANTS},
    res AS (
      INSERT INTO reservations (id, account_id, key_id, model, amount, day, state, lease_until, created_at, idempotency_key)
      VALUES ($13::text, $1::text, $14::text, $15::text, $16::bigint, $17::text, 'held', $18::bigint, $2::bigint, $19::text)
      RETURNING 1),
    holds AS (
      INSERT INTO reservation_holds (reservation_id, grant_id, amount)
      SELECT $13::text, u.id, u.take FROM unnest($3::text[], $4::bigint[]) AS u(id, take) WHERE u.take > 0
      RETURNING 1),
    -- The cap: today's settled credits plus every hold in flight plus the new one.
    hold_key AS (
      UPDATE api_keys SET held = held + $16::bigint, rate_tat = COALESCE($20::float8, rate_tat)
      WHERE id = $14::text AND (daily_credit_limit IS NULL OR held + $16::bigint
        + COALESCE((SELECT spent FROM key_days WHERE key_id = $14::text AND day = $17::text), 0) <= daily_credit_limit)
      RETURNING 1),
    -- An Idempotency-Key claim lives as long as the reservation it took.
    claim AS (
      UPDATE idempotency_keys SET reservation_id = $13::text
      WHERE account_id = $1::text AND key = $19::text AND state = 'running' RETURNING 1)
    SELECT ${CHANGE_COUNTS}, (SELECT count(*) FROM res)::int AS reservations, (SELECT count(*) FROM holds)::int AS holds,
      (SELECT count(*) FROM hold_key)::int AS keys`,

  /**
   * Settle, statement 2: closes reservation $13 (key $14) from state $19 as charged $17;
   * lifts its key hold $16; adds $17 to the key's day $15 under cap $18; the completion
   * (model $20, routed $21, tokens $22 and $23); the Idempotency-Key $24's stored response ($25, $26).
   */
  settleApply: `WITH ${CHANGE_GRANTS},
    unhold_key AS (
      UPDATE api_keys SET held = held - $16::bigint WHERE id = $14::text AND $16::bigint > 0 AND held >= $16::bigint
      RETURNING 1),
    -- Today's spent plus the key's other holds (its own lifted above, which this snapshot does not see).
    spend AS (
      INSERT INTO key_days AS d (key_id, day, spent)
      SELECT $14::text, $15::text, $17::bigint
      WHERE $18::bigint IS NULL OR $17::bigint + (SELECT held FROM api_keys WHERE id = $14::text) - $16::bigint <= $18::bigint
      ON CONFLICT (key_id, day) DO UPDATE SET spent = d.spent + EXCLUDED.spent
      WHERE $18::bigint IS NULL
        OR d.spent + EXCLUDED.spent + (SELECT held FROM api_keys WHERE id = $14::text) - $16::bigint <= $18::bigint
      RETURNING 1),
    closed AS (
      UPDATE reservations SET state = 'settled', charged = $17::bigint, closed_at = $2::bigint
      WHERE id = $13::text AND state = $19::text RETURNING 1),
    completion AS (
      INSERT INTO completions
        (reservation_id, account_id, key_id, model, routed_model, prompt_tokens, completion_tokens, credits, settled_at)
      VALUES ($13::text, $1::text, $14::text, $20::text, $21::text, $22::bigint, $23::bigint, $17::bigint, $2::bigint)
      RETURNING 1),
    response AS (
      UPDATE idempotency_keys SET state = 'done', status = $25::int, body = $26::text
      WHERE account_id = $1::text AND key = $24::text AND reservation_id = $13::text AND state = 'running' RETURNING 1)
    SELECT ${CHANGE_COUNTS}, (SELECT count(*) FROM unhold_key)::int AS keys, (SELECT count(*) FROM spend)::int AS days,
      (SELECT count(*) FROM closed)::int AS closed, (SELECT count(*) FROM completion)::int AS completions,
      (SELECT count(*) FROM response)::int AS responses`,

  /**
   * Release, statement 2: closes held reservation $13 (key $14) as $16 at no charge, lifts
   * its key hold $15, and drops its Idempotency-Key claim $17 (null: keeps it).
   */
  releaseApply: `WITH ${CHANGE_GRANTS},
    closed AS (
      UPDATE reservations SET state = $16::text, charged = 0, closed_at = $2::bigint
      WHERE id = $13::text AND state = 'held' RETURNING 1),
    unhold_key AS (
      UPDATE api_keys SET held = held - $15::bigint WHERE id = $14::text AND held >= $15::bigint RETURNING 1),
    dropped AS (
      DELETE FROM idempotency_keys
      WHERE account_id = $1::text AND key = $17::text AND reservation_id = $13::text AND state = 'running' RETURNING 1)
    SELECT ${CHANGE_COUNTS}, (SELECT count(*) FROM closed)::int AS closed, (SELECT count(*) FROM unhold_key)::int AS keys`,

  nextLapsed: `SELECT id FROM reservations WHERE state = 'held' AND lease_until < $1
    ORDER BY lease_until LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED`,
  lapsedAccounts: `SELECT DISTINCT account_id FROM grants
    WHERE kind = 'earned' AND expires_at <= $1 AND balance > held LIMIT 1000`,
  renew: `UPDATE reservations SET lease_until = $2 WHERE id = $1 AND state = 'held'`,
  // What was delivered only grows: a late renewal never lowers what a sweeper would charge.
  renewDelivered: `UPDATE reservations SET lease_until = $2,
      delivered_credits = GREATEST(delivered_credits, $3), delivered_prompt_tokens = GREATEST(delivered_prompt_tokens, $4),
      delivered_completion_tokens = GREATEST(delivered_completion_tokens, $5), routed_model = $6
    WHERE id = $1 AND state = 'held'`,
  // What key $1 settled on day $2, read by a statement of its own (a refusal's second look, see reserve).
  daySpent: `SELECT COALESCE((SELECT spent FROM key_days WHERE key_id = $1 AND day = $2), 0)::bigint AS spent`,
  // What the account owns now, read by a statement of its own.
  ownedNow: `SELECT (${owned('$1', '$2')})::bigint AS owned`,
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
} as const;

export const STALE_DAY = 'metering stale day';

/**
 * The variant of a writing statement that is sent together with its COMMIT
 * (database.ts `commitWith`), so that no JS can look at its counts in between:
 * it checks them itself. Its counts must contain the JSON object $n (what the JS
 * expects of each guarded write), and the count named by $n+1 (if not null) must
 * be 1, else the statement fails, the COMMIT after it in the same query is never
 * run, and the transaction rolls back. A failure is raised as an error of an
 * integer cast of its message, which names what failed and how (`STALE_DAY`: the
 * cap guard on the key's day, retried whole by the caller). The message is built
 * from the counts, so it is computed, and can fail, only when the check does.
 */
export function committing(text: string, n: number): string {
  const at = text.lastIndexOf(`SELECT ${CHANGE_COUNTS}`);
  if (at < 0) throw new Error('not a writing statement');
  return `${text.slice(0, at).trimEnd()},
    counts AS MATERIALIZED (${text.slice(at)})
    SELECT c.*,
      CASE WHEN $${n + 1}::text IS NULL OR (to_jsonb(c) ->> $${n + 1}::text)::int = 1 THEN 0
        ELSE ('${STALE_DAY}: ' || to_jsonb(c)::text)::int END AS stale,
      CASE WHEN to_jsonb(c) @> $${n}::jsonb THEN 0
        ELSE ('metering guard failed: ' || to_jsonb(c)::text || ' expected ' || $${n}::text)::int END AS guard
    FROM counts c`;
}
