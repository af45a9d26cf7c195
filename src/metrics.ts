/** Prometheus metrics, one registry per app so that tests can build many. */
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class Metrics {
  readonly registry = new Registry();

  readonly requests = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP requests by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });

  readonly creditsCharged = new Counter({
    name: 'svc_credits_charged_total',
    help: 'Credits charged by settled completions, by model alias',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });

  readonly upstreamAttempts = new Counter({
    name: 'svc_upstream_attempts_total',
    help: 'Upstream attempts by upstream and outcome',
    labelNames: ['upstream', 'outcome'] as const,
    registers: [this.registry],
  });

  constructor(options: { defaultMetrics?: boolean } = {}) {
    if (options.defaultMetrics) collectDefaultMetrics({ register: this.registry });
  }
}
