/**
 * The composition root: `buildApp(deps)` wires config, store, providers and
 * routes into a Fastify instance, and does not listen. Tests use it directly.
 */
import Fastify from 'fastify';
import type { FastifyInstance, RouteOptions } from 'fastify';
import type { DestinationStream, LoggerOptions } from 'pino';
import type { Clock } from './clock.js';
import { systemClock } from './clock.js';
import type { GatewayConfig } from './config.js';
import { Breaker } from './gateway/breaker.js';
import { Catalog } from './gateway/catalog.js';
import { CompletionService } from './gateway/completion.js';
import { LeaseKeeper, startSweeper } from './gateway/lease.js';
import { Router } from './gateway/router.js';
import { AliasTraffic, UpstreamStats } from './gateway/traffic.js';
import { dashboardRoutes } from './http/routes/dashboard.js';
import { defaultClassifier, type PromptClassifier } from './gateway/auto/classifier.js';
import { authenticateKey } from './http/auth.js';
import { BODY_LIMIT_BYTES, installErrorHandling, sendError, toGatewayError } from './http/errors.js';
import { errors } from './errors.js';
import { chatCompletionRoutes } from './http/routes/v1/chat-completions.js';
import { accountRoutes } from './http/routes/v1/account.js';
import { usageRoutes } from './http/routes/v1/usage.js';
import { adminRoutes } from './http/routes/admin.js';
import { healthRoutes } from './http/routes/health.js';
import { openApiRoutes } from './http/openapi.js';
import { refuseNulInUrl } from './http/text-guard.js';
import { newId } from './ids.js';
import { scrubSecrets } from './keys/secret.js';
import { Metrics } from './metrics.js';
import { buildProviders } from './providers/registry.js';
import type { ProviderAdapter } from './providers/types.js';
import type { Store } from './store/types.js';

export interface AppDeps {
  config: GatewayConfig;
  store: Store;
  /** svc-auto's classifier; the shipped model (data/auto/model.json) when absent. */
  classifier?: PromptClassifier;
  clock?: Clock;
  /** Provider keys by variable name (from the environment, read once in main). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Enables /admin/v1 when set. */
  adminToken?: string | null;
  logger?: { level?: string; stream?: DestinationStream } | false;
  /** Replaces the adapters built from the config (tests). */
  adapters?: ReadonlyMap<string, ProviderAdapter>;
  /** A reservation's lease; renewed at a third of it. */
  leaseMs?: number;
  sweepEveryMs?: number;
  defaultMetrics?: boolean;
  /** Sees every route as it is registered (the API document's test lists them). */
  onRoute?: (route: RouteOptions) => void;
}

const SANE_REQUEST_ID = /^[\w.:-]{1,128}$/;

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const clock = deps.clock ?? systemClock;
  const { config, store } = deps;
  // First: a missing or corrupt model file stops the boot before anything is opened.
  const classifier = deps.classifier ?? defaultClassifier();
  const providers = deps.adapters ? { adapters: deps.adapters, close: async () => {} } : buildProviders(config.providers, deps.env ?? {});
  const catalog = new Catalog(config);
  const breaker = new Breaker(config.routing.breaker.failures, config.routing.breaker.cooldown_ms, clock);
  const router = new Router(catalog, providers.adapters, breaker, classifier, config.auto.when_unsure);
  const metrics = new Metrics({ defaultMetrics: deps.defaultMetrics ?? false });
  const leaseMs = deps.leaseMs ?? 30_000;
  const upstreamStats = new UpstreamStats(clock);
  const traffic = new AliasTraffic(clock);
  // Created before the app, it reports through the app's logger once there is one.
  const leases = new LeaseKeeper(store, leaseMs, (err) => app.log.error({ err }, 'lease renewal failed'));
  const completions = new CompletionService({
    store, catalog, router, breaker, clock, metrics, leaseMs, leases, firstByteTimeoutMs: config.routing.first_byte_timeout_ms,
    hedgeAfterMs: config.routing.hedge_after_ms, streamIdleTimeoutMs: config.routing.stream_idle_timeout_ms,
    maxRequestMs: config.routing.max_request_ms, upstreamStats, traffic,
  });

  const app = Fastify({
    logger: loggerOptions(deps.logger),
    // A chat completion writes its own one line (src/http/completion-log.ts); Fastify's two lines per
    // request stay for every other route.
    disableRequestLogging: (req) => (req.url ?? '').startsWith('/v1/chat/completions'),
    bodyLimit: BODY_LIMIT_BYTES,
    ...socketLimits(config.server),
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && SANE_REQUEST_ID.test(given) ? given : newId('req');
    },
    return503OnClosing: true,
    // Requests Fastify refuses before routing (a path with broken percent-encoding) get the one error body too.
    frameworkErrors: (error, request, reply) => {
      reply.header('x-request-id', request.id);
      sendError(reply, error.code === 'FST_ERR_BAD_URL' ? errors.notFound('The path is not valid URL encoding.') : toGatewayError(error));
    },
  });

  app.server.maxConnections = config.server.max_connections;
  if (deps.onRoute) app.addHook('onRoute', deps.onRoute);

  app.decorateRequest('caller', null);
  app.decorateRequest('arrivedAt', 0);
  app.addHook('onRequest', async (request, reply) => {
    request.arrivedAt = clock.now().getTime();
    reply.header('x-request-id', request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unknown';
    metrics.requests.observe({ method: request.method, route, status: reply.statusCode }, reply.elapsedTime / 1000);
  });
  installErrorHandling(app, (error) => metrics.recordRefusal(error.status, error.code));
  metrics.watchBreakers({ upstreams: () => router.upstreams(), stateOf: (upstream) => breaker.stateOf(upstream) });
  refuseNulInUrl(app);

  healthRoutes(app, { store, metrics });
  dashboardRoutes(app);
  openApiRoutes(app);
  await app.register(async (v1) => {
    v1.addHook('onRequest', async (request) => {
      request.caller = await authenticateKey(store, clock, request);
    });
    chatCompletionRoutes(v1, { store, completions, maxInFlight: config.limits.max_in_flight, metrics, logPrompts: config.logging.prompts });
    accountRoutes(v1, { store, catalog, clock });
    usageRoutes(v1, { store, clock });
  }, { prefix: '/v1' });
  if (deps.adminToken) {
    const adminToken = deps.adminToken;
    await app.register(async (admin) => adminRoutes(admin, { store, clock, router, breaker, adminToken, upstreamStats, traffic }), { prefix: '/admin/v1' });
  }

  const stopSweeper = startSweeper(store, deps.sweepEveryMs ?? 15_000, (err) => app.log.error({ err }, 'lease sweep failed'));
  app.addHook('onClose', async () => {
    stopSweeper();
    leases.close();
    await providers.close();
  });
  return app;
}

/**
 * Slow and idle clients (slowloris): the request (headers, then body) must arrive in time, an idle
 * kept-alive socket closes. These bound receiving only; an answer (a long stream) takes what it takes.
 * Node checks the request timeouts every `connectionsCheckingInterval`, so it runs often enough to
 * cut a client near its deadline.
 */
function socketLimits(server: GatewayConfig['server']) {
  const checkEveryMs = Math.max(10, Math.min(1_000, Math.floor(server.headers_timeout_ms / 4)));
  return {
    requestTimeout: server.request_timeout_ms,
    keepAliveTimeout: server.keep_alive_timeout_ms,
    connectionTimeout: server.connection_timeout_ms,
    http: {
      requestTimeout: server.request_timeout_ms,
      headersTimeout: server.headers_timeout_ms,
      connectionsCheckingInterval: checkEveryMs,
      // Refused by the gateway's own hook instead (installErrorHandling), so that the 400 carries the error body.
      requireHostHeader: false,
    },
  };
}

function loggerOptions(logger: AppDeps['logger']): false | (LoggerOptions & { stream?: DestinationStream }) {
  if (logger === false) return false;
  return {
    level: logger?.level ?? 'info',
    ...(logger?.stream ? { stream: logger.stream } : {}),
    // Requests are logged by method and URL only, and a key pasted into a URL is scrubbed from it.
    serializers: {
      req: (req: { method?: string; url?: string; socket?: { remoteAddress?: string } }) => ({
        method: req.method,
        url: scrubSecrets(req.url ?? ''),
        remoteAddress: req.socket?.remoteAddress,
      }),
    },
    redact: { paths: ['req.headers.authorization', 'headers.authorization'], censor: '[redacted]' },
  };
}
