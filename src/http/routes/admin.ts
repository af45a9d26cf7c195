/** The operator's API under /admin/v1, only when SVC_ADMIN_TOKEN is set. */
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../../clock.js';
import { errors } from '../../errors.js';
import type { Breaker } from '../../gateway/breaker.js';
import type { Router } from '../../gateway/router.js';
import type { AliasTraffic, UpstreamStats } from '../../gateway/traffic.js';
import { apiKeyObject, issueApiKey } from '../../keys/issue.js';
import { ACCOUNTS_PAGE, accountObject, accountsPage, accountWithCredits, grantObject, grantProblem } from '../../metering/credits.js';
import type { Account, Store } from '../../store/types.js';
import { isAdminToken } from '../auth.js';
import { allowOnly, parseBody, parseQuery } from '../errors.js';
import { createAccountBody, grantBody, listAccountsQuery, type AccountObject } from '../schemas/admin.js';
import { createApiKeyBody } from '../schemas/api-key.js';

export interface AdminRouteDeps {
  store: Store;
  clock: Clock;
  router: Router;
  breaker: Breaker;
  adminToken: string;
  upstreamStats: UpstreamStats;
  traffic: AliasTraffic;
}

export function adminRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  const { store, clock } = deps;
  app.addHook('onRequest', async (request) => {
    if (!isAdminToken(request, deps.adminToken)) throw errors.invalidApiKey('Invalid admin token.');
  });

  const account = async (id: string): Promise<Account> => {
    const found = await store.getAccount(id);
    if (!found) throw errors.accountNotFound(id);
    return found;
  };

  allowOnly(app, '/accounts', ['GET', 'POST']);
  app.get<{ Querystring: Record<string, unknown> }>('/accounts', async (request) => {
    return accountsPage(store, parseQuery(listAccountsQuery, request.query), clock.now());
  });

  app.post('/accounts', async (request, reply) => {
    const body = parseBody(createAccountBody, request.body, {});
    const created = await store.createAccount(body.name ?? null);
    return reply.status(201).send(accountObject(created));
  });

  allowOnly(app, '/accounts/:id', ['GET']);
  app.get<{ Params: { id: string } }>('/accounts/:id', async (request) => {
    return accountWithCredits(store, await account(request.params.id), clock.now());
  });

  allowOnly(app, '/accounts/:id/grants', ['POST']);
  app.post<{ Params: { id: string } }>('/accounts/:id/grants', async (request, reply) => {
    const found = await account(request.params.id);
    const body = parseBody(grantBody, request.body);
    const input = { kind: body.kind, amount: body.amount, expiresAt: body.expires_at ? new Date(body.expires_at) : null };
    const problem = grantProblem(input);
    if (problem) throw errors.invalidValue(problem.param, problem.message);
    const grant = await store.grant(found.id, input.kind, input.amount, input.expiresAt);
    return reply.status(201).send(grantObject(grant));
  });

  allowOnly(app, '/accounts/:id/api-keys', ['POST']);
  app.post<{ Params: { id: string } }>('/accounts/:id/api-keys', async (request, reply) => {
    const found = await account(request.params.id);
    const body = parseBody(createApiKeyBody, request.body, {});
    const { record, secret } = await issueApiKey(store, found.id, body);
    return reply.status(201).send({ ...apiKeyObject(record), key: secret });
  });

  allowOnly(app, '/upstreams', ['GET']);
  // The breaker's state with the recent window of attempts (this instance's own).
  app.get('/upstreams', async () => ({
    object: 'list',
    data: deps.breaker.view(deps.router.upstreams()).map((h) => ({ ...h, ...deps.upstreamStats.view(h.upstream) })),
  }));

  allowOnly(app, '/traffic', ['GET']);
  app.get('/traffic', async () => deps.traffic.view());
}
