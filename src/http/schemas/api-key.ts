import { z } from 'zod';

/** POST /v1/api-keys (and the admin's key creation). */
export const createApiKeyBody = z.object({
  name: z.string().max(200).nullish(),
  environment: z.enum(['live', 'test']).nullish(),
  daily_credit_limit: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullish(),
});

export type CreateApiKeyBody = z.infer<typeof createApiKeyBody>;
