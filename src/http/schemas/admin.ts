/** The operator's API under /admin/v1: request bodies and answers. */
import { z } from 'zod';
import { creditsObject } from './account.js';

const isoTime = z.string().describe('ISO 8601, UTC, whole seconds');

export const createAccountBody = z.object({ name: z.string().max(200).nullish() });

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

export const upstreamHealth = z.object({
  upstream: z.string().describe('provider/model'),
  state: z.enum(['closed', 'open']).describe('open: failed too often in a row, tried only after the healthy ones until its cooldown ends'),
  consecutive_failures: z.number().int().nonnegative(),
  open_until: z.string().nullable(),
  successes: z.number().int().nonnegative(),
  failures: z.number().int().nonnegative(),
  last_error: z.string().nullable(),
}).describe('An upstream\'s health as this instance\'s router sees it');

export const upstreamList = z.object({ object: z.literal('list'), data: z.array(upstreamHealth) });

export type AccountObject = z.infer<typeof accountObject>;
export type CreditGrantObject = z.infer<typeof creditGrantObject>;
export type UpstreamHealth = z.infer<typeof upstreamHealth>;
