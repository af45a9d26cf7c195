/** Unauthenticated probes: alive, ready (the database answers), and Prometheus metrics. */
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../metrics.js';
import type { Store } from '../../store/types.js';
import type { HealthObject, ReadinessObject } from '../schemas/health.js';

export function healthRoutes(app: FastifyInstance, { store, metrics }: { store: Store; metrics: Metrics }): void {
  app.get('/healthz', async (): Promise<HealthObject> => ({ status: 'ok' }));

  app.get('/readyz', async (request, reply) => {
    try {
      await store.ping();
      return { status: 'ready', database: store.kind } satisfies ReadinessObject;
    } catch (err) {
      request.log.warn({ err }, 'database not reachable');
      return reply.status(503).send({ status: 'unavailable', database: store.kind } satisfies ReadinessObject);
    }
  });

  app.get('/metrics', async (_request, reply) => {
    reply.header('content-type', metrics.registry.contentType);
    return metrics.registry.metrics();
  });
}
