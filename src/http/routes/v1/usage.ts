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
import { allowOnly, parseQuery } from '../../errors.js';
import { usageQuery } from '../../schemas/account.js';

export function usageRoutes(app: FastifyInstance, { store, clock }: { store: Store; clock: Clock }): void {
  allowOnly(app, '/usage', ['GET']);
  app.get('/usage', async (request) => {
    const q = parseQuery(usageQuery, request.query);
    const period = usagePeriod(q, clock.now());
    if (!period.ok) throw errors.invalidValue(period.param, period.message);
    return accountUsage(store, request.caller!.accountId, period, q.model);
  });
}
