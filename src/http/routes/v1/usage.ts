/**
 * GET /v1/usage: settled completions of the whole account, by UTC day of
 * settlement and model alias. Dates default to the last 30 days ending today.
 * The rollup itself is shared with the CLI (src/metering/usage.ts).
 */
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../../../clock.js';
import { errors } from '../../../errors.js';
import { accountUsage, usagePeriod } from '../../../metering/usage.js';
import type { Store } from '../../../store/types.js';
import { allowOnly } from '../../errors.js';

interface UsageQuerystring {
  start_date?: unknown;
  end_date?: unknown;
  model?: unknown;
}

export function usageRoutes(app: FastifyInstance, { store, clock }: { store: Store; clock: Clock }): void {
  allowOnly(app, '/usage', ['GET']);
  app.get<{ Querystring: UsageQuerystring }>('/usage', async (request) => {
    const q = request.query;
    const period = usagePeriod(q, clock.now());
    if (!period.ok) throw errors.invalidValue(period.param, period.message);
    if (q.model !== undefined && typeof q.model !== 'string') throw errors.invalidValue('model', 'model must be a string.');
    return accountUsage(store, request.caller!.accountId, period, q.model);
  });
}
