/** What the caller's own API answers: models, credits, API keys, usage (GET/POST/DELETE under /v1). */
import { z } from 'zod';

const isoTime = z.string().describe('ISO 8601, UTC, whole seconds');
const credits = z.number().int().nonnegative();

export const modelObject = z.object({
  id: z.string().describe('The alias callers ask for'),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.literal('svc-gateway'),
  name: z.string(),
  context_window: z.number().int().positive(),
  pricing: z.object({ input_credits_per_1k: credits, output_credits_per_1k: credits }),
  description: z.string(),
}).describe('A model alias of the catalog, with its price');

export const modelList = z.object({ object: z.literal('list'), data: z.array(modelObject) });

export const creditsObject = z.object({
  account_id: z.string(),
  total_credits: credits.describe('Owned (settled) credits: earned plus purchased'),
  earned_credits: z.object({ balance: credits, expires_at: isoTime.nullable(), days_remaining: z.number().int().nonnegative() }),
  purchased_credits: z.object({ balance: credits, expires_at: z.null() }),
  currency: z.literal('SVC_CREDITS'),
  reserved_credits: credits.describe('Held by requests in flight'),
  available_credits: z.number().int().describe('total_credits minus reserved_credits'),
}).describe('The account\'s balances');

export const apiKeyObject = z.object({
  id: z.string(),
  object: z.literal('api_key'),
  name: z.string().nullable(),
  environment: z.enum(['live', 'test']),
  daily_credit_limit: credits.nullable(),
  rate_limit_rpm: z.number().int().positive().nullable(),
  redacted_key: z.string(),
  created_at: isoTime,
  last_used_at: isoTime.nullable(),
  credits_spent_today: credits,
}).describe('An API key as the API shows it: never the secret');

export const apiKeyCreated = apiKeyObject.extend({
  key: z.string().describe('The secret, shown this once'),
}).describe('A new API key, with its secret');

export const apiKeyList = z.object({ object: z.literal('list'), data: z.array(apiKeyObject) });

export const apiKeyDeleted = z.object({ id: z.string(), object: z.literal('api_key'), deleted: z.literal(true) });

const day = z.string().describe('YYYY-MM-DD');

/** GET /v1/usage's query; the handler checks further that each is a calendar date and the span at most 366 days. */
export const usageQuery = z.object({
  start_date: z.string({ error: 'start_date must be a date as YYYY-MM-DD.' })
    .regex(/^\d{4}-\d{2}-\d{2}$/, { error: 'start_date must be a date as YYYY-MM-DD.' }).optional()
    .describe('First UTC day, YYYY-MM-DD; default 29 days before end_date'),
  end_date: z.string({ error: 'end_date must be a date as YYYY-MM-DD.' })
    .regex(/^\d{4}-\d{2}-\d{2}$/, { error: 'end_date must be a date as YYYY-MM-DD.' }).optional()
    .describe('Last UTC day, YYYY-MM-DD; default today'),
  model: z.string({ error: 'model must be a string.' }).optional().describe('Only this alias'),
});

export const usageObject = z.object({
  object: z.literal('usage'),
  period_start: isoTime,
  period_end: isoTime,
  total_requests: z.number().int().nonnegative(),
  total_prompt_tokens: z.number().int().nonnegative(),
  total_completion_tokens: z.number().int().nonnegative(),
  total_credits_spent: credits,
  breakdown_by_model: z.record(z.string(), z.object({ requests: z.number().int().nonnegative(), credits })),
  daily: z.array(z.object({
    date: day, model: z.string(), requests: z.number().int().nonnegative(),
    prompt_tokens: z.number().int().nonnegative(), completion_tokens: z.number().int().nonnegative(), credits,
  })),
}).describe('Settled completions of the whole account, by UTC day of settlement and alias');

export type ModelObject = z.infer<typeof modelObject>;
export type CreditsObject = z.infer<typeof creditsObject>;
export type ApiKeyObject = z.infer<typeof apiKeyObject>;
export type UsageQuery = z.infer<typeof usageQuery>;
export type UsageObject = z.infer<typeof usageObject>;
