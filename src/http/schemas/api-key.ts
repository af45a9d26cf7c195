import { z } from 'zod';
import { storedText } from '../text-guard.js';

/** POST /v1/api-keys (and the admin's key creation). */
export const createApiKeyBody = z.object({
  name: storedText(200).nullish(),
  environment: z.enum(['live', 'test']).nullish(),
  daily_credit_limit: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullish(),
  /** Requests per minute, across every instance; null or absent = no limit. */
  rate_limit_rpm: z.number().int().min(1).max(1_000_000).nullish(),
});

export type CreateApiKeyBody = z.infer<typeof createApiKeyBody>;
