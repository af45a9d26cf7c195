/**
 * Prometheus metrics, one registry per app so that tests can build many.
 *
 * Every label value comes from the configuration or from the gateway's own
 * vocabulary (aliases, upstream ids `provider/model`, error codes, outcomes),
 * never from what a caller sent: the number of series stays bounded.
 */
import cluster from 'node:cluster';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** A breaker's state as a number: 0 closed, 1 half-open (cooled down, on trial), 2 open. */
export const BREAKER_STATE_VALUE = { closed: 0, half_open: 1, open: 2 } as const;
export type BreakerState = keyof typeof BREAKER_STATE_VALUE;

/** What the breaker gauge reads when it is scraped. */
export interface BreakerSource {
  upstreams(): string[];
  stateOf(upstream: string): BreakerState;
}

/** Statuses whose refusals are counted by reason (the code of the error body). */
export const REFUSED_STATUSES: ReadonlySet<number> = new Set([401, 402, 429, 503]);

const LATENCY_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

export class Metrics {
  readonly registry = new Registry();

  readonly requests = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly completions = new Counter({
    name: 'svc_completions_total',
    help: 'Chat completions by model alias, HTTP status, the upstream route that served (none when none did) and mode (stream or json)',
    labelNames: ['alias', 'status', 'route', 'mode'] as const,
    registers: [this.registry],
  });

  readonly upstreamAttempts = new Counter({
    name: 'svc_upstream_attempts_total',
    help: 'Upstream attempts by upstream and outcome',
    labelNames: ['upstream', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly upstreamLatency = new Histogram({
    name: 'svc_upstream_latency_seconds',
    help: 'From the start of an upstream attempt to the end of its answer (outcome ok) or to its failure (the failure kind)',
    labelNames: ['upstream', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly timeToFirstToken = new Histogram({
    name: 'svc_upstream_time_to_first_token_seconds',
    help: 'From the start of an upstream attempt to its first content, for attempts that produced one',
    labelNames: ['upstream'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  readonly failovers = new Counter({
    name: 'svc_failovers_total',
    help: 'Times a failed upstream handed a request over to the next route, by the upstream that failed',
    labelNames: ['upstream'] as const,
    registers: [this.registry],
  });

  readonly hedges = new Counter({
    name: 'svc_hedges_total',
    help: 'Hedged attempts: a next route started alongside a silent one, by the upstream started',
    labelNames: ['upstream'] as const,
    registers: [this.registry],
  });

  readonly breakerState = new Gauge({
    name: 'svc_breaker_state',
    help: 'Circuit breaker per upstream: 0 closed, 1 half-open, 2 open',
    labelNames: ['upstream'] as const,
    registers: [this.registry],
    // Read from the breaker at scrape time, so it is never stale.
    collect: () => this.collectBreakers(),
  });

  readonly creditsReserved = new Counter({
    name: 'svc_credits_reserved_total',
    help: 'Credits held by reservations this process took, by model alias',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly creditsCharged = new Counter({
    name: 'svc_credits_charged_total',
    help: 'Credits charged by settled completions, by model alias',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly creditsReleased = new Counter({
    name: 'svc_credits_released_total',
    help: 'Reserved credits given back uncharged (the rest of a settled hold, or a whole released one), by model alias',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly creditsShortfall = new Counter({
    name: 'svc_credits_shortfall_total',
    help: 'Credits a settlement asked for beyond what the account and key could give (recorded on the ledger, never collected), by model alias',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly holdsOpen = new Gauge({
    name: 'svc_holds_open',
    help: 'Reservations this process holds now (taken, not yet settled or released)',
    registers: [this.registry],
  });

  readonly refused = new Counter({
    name: 'svc_requests_refused_total',
    help: 'Requests refused with 401, 402, 429 or 503, by status and reason (the error code)',
    labelNames: ['status', 'reason'] as const,
    registers: [this.registry],
  });

  private breakers: BreakerSource | null = null;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    // Under `serve --workers N` a scrape reaches one worker: its series carry which, so that they never mix.
    if (cluster.isWorker && cluster.worker) this.registry.setDefaultLabels({ worker: String(cluster.worker.id) });
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }

  watchBreakers(source: BreakerSource): void {
    this.breakers = source;
  }

  private collectBreakers(): void {
    const source = this.breakers;
    if (!source) return;
    for (const upstream of source.upstreams()) this.breakerState.set({ upstream }, BREAKER_STATE_VALUE[source.stateOf(upstream)]);
  }

  /** Counts a refusal when its status is one of REFUSED_STATUSES. */
  recordRefusal(status: number, code: string): void {
    if (REFUSED_STATUSES.has(status)) this.refused.inc({ status: String(status), reason: code });
  }
}
