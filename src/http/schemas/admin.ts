/** The operator's API under /admin/v1: request bodies and answers. */
import { z } from 'zod';
import { storedText } from '../text-guard.js';
import { creditsObject } from './account.js';

const isoTime = z.string().describe('ISO 8601, UTC, whole seconds');

export const createAccountBody = z.object({ name: storedText(200).nullish() });

export const grantBody = z.object({
  kind: z.enum(['earned', 'purchased']),
  amount: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  expires_at: z.iso.datetime({ offset: true }).nullish().describe('Required for earned credits (may lie in the past); refused for purchased'),
});

export const accountObject = z.object({
  id: z.string(),
  object: z.literal('account'),
  name: z.string().nullable(),
  created_at: isoTime,
});

export const accountWithCredits = accountObject.extend({ credits: creditsObject });

export const creditGrantObject = z.object({
  id: z.string(),
  object: z.literal('credit_grant'),
  account_id: z.string(),
  kind: z.enum(['earned', 'purchased']),
  amount: z.number().int().positive(),
  expires_at: isoTime.nullable(),
  created_at: isoTime,
});

export const listAccountsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20).describe('Accounts on the page, 1-100 (default 20)'),
  after: storedText(100).optional().describe('The last id of the previous page'),
});

export const accountList = z.object({
  object: z.literal('list'),
  data: z.array(accountWithCredits),
  has_more: z.boolean().describe('More accounts follow the last id of this page'),
});

/** What the breaker knows of an upstream. */
export const breakerHealth = z.object({
  upstream: z.string().describe('provider/model'),
  state: z.enum(['closed', 'open']).describe('open: failed too often in a row, tried only after the healthy ones until its cooldown ends'),
  consecutive_failures: z.number().int().nonnegative(),
  open_until: z.string().nullable(),
  successes: z.number().int().nonnegative(),
  failures: z.number().int().nonnegative(),
  last_error: z.string().nullable(),
});

/** …with the recent window of attempts beside it. */
export const upstreamHealth = breakerHealth.extend({
  recent_attempts: z.number().int().nonnegative().describe('Attempts in the window: the last 100, at most 5 minutes old'),
  recent_failures: z.number().int().nonnegative(),
  recent_error_rate: z.number().min(0).max(1).nullable(),
  latency_p50_ms: z.number().nonnegative().nullable().describe('Time to the first byte, or to the failure'),
  latency_p95_ms: z.number().nonnegative().nullable(),
}).describe('An upstream\'s health as this instance\'s router sees it');

export const upstreamList = z.object({ object: z.literal('list'), data: z.array(upstreamHealth) });

export const trafficObject = z.object({
  object: z.literal('traffic'),
  start: isoTime.describe('The first minute of the series'),
  minutes: z.number().int().positive(),
  by_alias: z.record(z.string(), z.array(z.number().int().nonnegative())).describe('Requests per minute, oldest first, as this instance counted them'),
});

export type AccountObject = z.infer<typeof accountObject>;
export type CreditGrantObject = z.infer<typeof creditGrantObject>;
export type UpstreamHealth = z.infer<typeof upstreamHealth>;
export type BreakerHealth = z.infer<typeof breakerHealth>;
