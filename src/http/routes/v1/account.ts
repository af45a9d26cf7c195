/** GET /v1/models, /v1/models/{id}, /v1/credits and /v1/api-keys: the caller's own account. */
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../../../clock.js';
import { errors } from '../../../errors.js';
import type { Catalog } from '../../../gateway/catalog.js';
import { modelObject } from '../../../gateway/catalog.js';
import { apiKeyList, apiKeyObject, issueApiKey, revokedKeyObject } from '../../../keys/issue.js';
import type { Permission } from '../../../keys/permissions.js';
import { mayCreate, mayRevoke } from '../../../keys/permissions.js';
import { accountCredits } from '../../../metering/credits.js';
import type { Store } from '../../../store/types.js';
import { allowOnly, parseBody } from '../../errors.js';
import { createApiKeyBody } from '../../schemas/api-key.js';

export interface AccountRouteDeps {
  store: Store;
  catalog: Catalog;
  clock: Clock;
}

export function accountRoutes(app: FastifyInstance, { store, catalog, clock }: AccountRouteDeps): void {
  allowOnly(app, '/models', ['GET']);
  app.get('/models', async () => ({ object: 'list', data: catalog.list().map(modelObject) }));

  allowOnly(app, '/models/:id', ['GET']);
  app.get<{ Params: { id: string } }>('/models/:id', async (request) => {
    const entry = catalog.get(request.params.id);
    if (!entry) throw errors.modelNotFound(request.params.id);
    return modelObject(entry);
  });

  allowOnly(app, '/credits', ['GET']);
  app.get('/credits', async (request) => accountCredits(store, request.caller!.accountId, clock.now()));

  allowOnly(app, '/api-keys', ['GET', 'POST']);
  app.get('/api-keys', async (request) => {
    return apiKeyList(await store.listApiKeys(request.caller!.accountId));
  });

  app.post('/api-keys', async (request, reply) => {
    const body = parseBody(createApiKeyBody, request.body, {});
    enforce(mayCreate(request.caller!.key, body));
    const { record, secret } = await issueApiKey(store, request.caller!.accountId, body);
    return reply.status(201).send({ ...apiKeyObject(record), key: secret });
  });

  allowOnly(app, '/api-keys/:id', ['DELETE']);
  app.delete<{ Params: { id: string } }>('/api-keys/:id', async (request) => {
    const { id } = request.params;
    // A key that may revoke only itself learns nothing about other ids: 403 whether they exist or not.
    enforce(mayRevoke(request.caller!.key, id));
    if (!(await store.revokeApiKey(request.caller!.accountId, id))) throw errors.apiKeyNotFound(id);
    return revokedKeyObject(id);
  });
}

function enforce(permission: Permission): void {
  if (!permission.allowed) throw errors.permissionDenied(permission.reason, permission.param);
}
