/**
 * One operation against the stores, and the same operation against the model,
 * each answering a normalised Outcome. The store side goes the way the gateway
 * goes: authentication (a revoked key is refused there, before the store),
 * then the reservation with the gateway's own planner; the model decides from
 * the contract alone.
 */
import { issueApiKey } from '../src/keys/issue.js';
import { planReservation } from '../src/metering/pricing.js';
import type { Delivered, Store } from '../src/store/types.js';
import { delivered, type Model, type Outcome } from './model.js';
import type { Op } from './ops.js';

export type SimpleOp = Extract<Op, { t: 'reserve' | 'settle' | 'release' | 'renew' | 'sweep' | 'claim' | 'revoke' }>;

export function isSimple(op: Op): op is SimpleOp {
  return ['reserve', 'settle', 'release', 'renew', 'sweep', 'claim', 'revoke'].includes(op.t);
}

/** Runs `op` on its instance. `model` is the state before the step; it only supplies ids and amounts. */
export async function onStore(stores: Store[], model: Model, op: SimpleOp): Promise<Outcome> {
  const store = stores[op.i % stores.length]!;
  switch (op.t) {
    case 'reserve': {
      const key = model.key(op.k)!;
      const acc = model.account(key.account)!;
      const record = await store.findApiKey(key.id);
      if (!record || record.revokedAt !== null) return { ok: false, reason: 'revoked' };
      const plan = planReservation({
        promptTokens: op.prompt, maxTokens: op.maxTokens, contextWindow: op.context,
        pricing: { input_credits_per_1k: op.price[0], output_credits_per_1k: op.price[1] },
      });
      const out = await store.reserve({
        reservationId: op.r, accountId: acc.id, keyId: key.id, model: 'sim', leaseMs: op.leaseMs,
        ...(op.idem !== null && { idempotencyKey: op.idem }),
      }, plan);
      if (out.ok) return { ok: true, amount: out.amount, maxOutput: out.maxOutput };
      if (out.reason === 'rate_limit') return { ok: false, reason: out.reason, retryAfterSeconds: out.retryAfterSeconds };
      return { ok: false, reason: out.reason };
    }
    case 'settle': {
      const result = await store.settle({
        reservationId: op.r, credits: model.credits(op.r, op.size), promptTokens: 1, completionTokens: 1, routedModel: 'sim',
        ...(op.respond && { respond: (settled) => ({ status: 200, body: settled }) }),
      });
      return { charged: result.charged, shortfall: result.shortfall, balanceRemaining: result.balanceRemaining };
    }
    case 'release':
      await store.release(op.r);
      return {};
    case 'renew': {
      const res = model.reservation(op.r)!;
      const report: Delivered | null = op.deliveredPct === null ? null
        : { credits: delivered(res.amount, op.deliveredPct), promptTokens: 1, completionTokens: 1, routedModel: 'sim' };
      return { held: await store.renewLease(op.r, op.leaseMs, report) };
    }
    case 'sweep':
      return { closed: await store.releaseExpiredLeases() };
    case 'claim': {
      const claim = await store.claimIdempotencyKey(model.account(op.a)!.id, op.key, op.fp);
      return claim.state === 'done' ? { state: 'done', body: JSON.stringify(claim.response.body) } : { state: claim.state };
    }
    case 'revoke': {
      const key = model.key(op.k)!;
      return { revoked: await store.revokeApiKey(model.account(key.account)!.id, key.id) };
    }
  }
}

/** The model's answer to `op` (a sweep is not one answer: see the runner). */
export function onModel(model: Model, op: SimpleOp, now: number): Outcome {
  switch (op.t) {
    case 'reserve': return model.reserve(op, now);
    case 'settle': return model.settle(op.r, model.credits(op.r, op.size), op.respond, now);
    case 'release': model.release(op.r, now); return {};
    case 'renew': return { held: model.renew(op.r, op.leaseMs, op.deliveredPct, now) };
    case 'claim': return model.claim(op.a, op.key, op.fp, now);
    case 'revoke': return { revoked: model.revoke(op.k) };
    case 'sweep': throw new Error('a sweep has no single answer');
  }
}

/** Creates accounts and keys and grants credits, on instance 0; false when the op names nothing that exists. */
export async function setup(store: Store, model: Model, op: Extract<Op, { t: 'account' | 'key' | 'grant' }>, now: number): Promise<boolean> {
  switch (op.t) {
    case 'account': {
      if (model.account(op.a)) return false;
      model.addAccount(op.a, (await store.createAccount(op.a)).id);
      return true;
    }
    case 'key': {
      const acc = model.account(op.a);
      if (!acc || model.key(op.k)) return false;
      const { record } = await issueApiKey(store, acc.id, { daily_credit_limit: op.lim, rate_limit_rpm: op.rpm });
      model.addKey(op.k, record.id, op.a, op.lim, op.rpm);
      return true;
    }
    case 'grant': {
      const acc = model.account(op.a);
      if (!acc) return false;
      const expiresAt = op.ttlMs === null ? null : now + op.ttlMs;
      const grant = await store.grant(acc.id, op.kind, op.amount, expiresAt === null ? null : new Date(expiresAt));
      model.grant(op.a, grant.id, op.amount, expiresAt, now);
      return true;
    }
  }
}
