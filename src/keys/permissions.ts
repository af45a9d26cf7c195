/**
 * What a key may do to the account's other keys: it never mints more than it
 * holds. A key with a daily cap creates only keys capped no higher, a `test`
 * key only `test` keys; only an uncapped `live` key revokes keys other than
 * itself. Pure: the outcome is a value, and the route turns a refusal into 403.
 * Operators (the admin API, the CLI) are not keys and are not asked.
 */
import type { ApiKeyRecord } from '../store/types.js';
import type { KeyRequest } from './issue.js';

export type KeyHolder = Pick<ApiKeyRecord, 'id' | 'environment' | 'dailyCreditLimit'> & Partial<Pick<ApiKeyRecord, 'rateLimitRpm'>>;

export type Permission =
  | { allowed: true }
  | { allowed: false; reason: string; param: string | null };

const ALLOWED: Permission = { allowed: true };

/** An uncapped `live` key manages every key of its account. */
export function managesAllKeys(holder: KeyHolder): boolean {
  return holder.environment === 'live' && holder.dailyCreditLimit === null && (holder.rateLimitRpm ?? null) === null;
}

/** May `holder` create the key `request` asks for (defaults as the API applies them)? */
export function mayCreate(holder: KeyHolder, request: KeyRequest): Permission {
  if (holder.environment === 'test' && (request.environment ?? 'live') !== 'test') {
    const asked = request.environment ? 'a live key' : 'a key without "environment", which means live';
    return deny('environment', `A test key may create only test keys, and this request asks for ${asked}. Pass "environment": "test".`);
  }
  const cap = holder.dailyCreditLimit;
  if (cap !== null) {
    const asked = request.daily_credit_limit ?? null;
    if (asked === null) {
      return deny('daily_credit_limit', `This key has a daily cap of ${cap} credits, so it may create only keys capped at ${cap} or less; ` +
        `a key without "daily_credit_limit" would have no cap. Pass "daily_credit_limit" of at most ${cap}.`);
    }
    if (asked > cap) {
      return deny('daily_credit_limit', `This key has a daily cap of ${cap} credits, so it may create only keys capped at ${cap} or less, not ${asked}.`);
    }
  }
  const rpm = holder.rateLimitRpm ?? null;
  if (rpm !== null) {
    const asked = request.rate_limit_rpm ?? null;
    if (asked === null || asked > rpm) {
      return deny('rate_limit_rpm', `This key allows ${rpm} requests per minute, so it may create only keys limited to ${rpm} or fewer; ` +
        `pass "rate_limit_rpm" of at most ${rpm}.`);
    }
  }
  return ALLOWED;
}

/** May `holder` revoke the key `targetId`? A key may always revoke itself. */
export function mayRevoke(holder: KeyHolder, targetId: string): Permission {
  if (targetId === holder.id || managesAllKeys(holder)) return ALLOWED;
  const why = holder.dailyCreditLimit !== null ? 'has a daily cap' : holder.environment === 'test' ? 'is a test key' : 'has a rate limit';
  return deny('id', `This key ${why}, so it may revoke only itself. Revoke other keys with an uncapped live key.`);
}

function deny(param: string, reason: string): Permission {
  return { allowed: false, reason, param };
}
