/** The unauthenticated probes' answers. */
import { z } from 'zod';

export const healthObject = z.object({ status: z.literal('ok') }).describe('The process is alive');

export const readinessObject = z.object({
  status: z.enum(['ready', 'unavailable']),
  database: z.enum(['sqlite', 'postgres']),
}).describe('Whether the database answers');

export type HealthObject = z.infer<typeof healthObject>;
export type ReadinessObject = z.infer<typeof readinessObject>;
