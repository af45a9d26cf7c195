/**
 * What one completion did, as operators see it: the hold it took and how it
 * closed (credits metrics, holds open), and the upstream that served with its
 * timings (latency and time-to-first-token histograms, the completion log line).
 */
import type { Metrics } from '../metrics.js';
import type { TokenUsage, UpstreamError } from '../providers/types.js';
import type { SettleResult } from '../store/types.js';
import type { FailoverOptions, Served } from './failover.js';
import type { Candidate } from './router.js';

export class CompletionTrace {
  /** The upstream (`provider/model`) that served the answer, the last one when it was continued. */
  upstream: string | null = null;
  /** When the first content arrived from the upstream (performance.now()). */
  firstContentAt: number | null = null;
  /** What the settlement charged, and for which tokens; null until settled (and when released). */
  charged: { credits: number; promptTokens: number; completionTokens: number } | null = null;
  /** Reserved credits still held by this process: counted in holds open until settled or released. */
  private held: number;

  constructor(private readonly metrics: Metrics, private readonly alias: string, reserved: number) {
    this.held = reserved;
    metrics.holdsOpen.inc();
    metrics.creditsReserved.inc({ model: alias }, reserved);
  }

  /** The winning attempt of an opening: the route serving from now on. */
  opened(served: Served<unknown>): void {
    this.upstream = served.candidate.upstream;
    this.firstContentAt ??= performance.now();
  }

  /** A served answer ended: completely (`ok`), or with the failure that broke it off. */
  answerEnded(served: Served<unknown>, outcome: 'ok' | UpstreamError['failure']): void {
    this.metrics.upstreamLatency.observe({ upstream: served.candidate.upstream, outcome }, (performance.now() - served.startedAt) / 1000);
  }

  settled(result: SettleResult, tokens: TokenUsage): void {
    const { metrics, alias } = this;
    this.charged = { credits: result.charged, promptTokens: tokens.promptTokens, completionTokens: tokens.completionTokens };
    metrics.creditsCharged.inc({ model: alias }, result.charged);
    metrics.creditsShortfall.inc({ model: alias }, result.shortfall);
    this.close(Math.max(0, this.held - result.charged));
  }

  released(): void {
    this.close(this.held);
  }

  /** The hold is no longer this process's to close (a sweeper will). */
  abandoned(): void {
    this.close(0);
  }

  private close(released: number): void {
    if (this.held < 0) return;
    this.held = -1;
    this.metrics.holdsOpen.dec();
    if (released > 0) this.metrics.creditsReleased.inc({ model: this.alias }, released);
  }
}

/** The failover hooks that feed the upstream metrics. */
export function failoverMetrics(metrics: Metrics): Pick<FailoverOptions, 'onAttempt' | 'onFailover' | 'onHedge'> {
  return {
    onAttempt: (c: Candidate, outcome, elapsedMs) => {
      metrics.upstreamAttempts.inc({ upstream: c.upstream, outcome });
      if (outcome === 'ok') metrics.timeToFirstToken.observe({ upstream: c.upstream }, elapsedMs / 1000);
      else metrics.upstreamLatency.observe({ upstream: c.upstream, outcome }, elapsedMs / 1000);
    },
    onFailover: (c) => metrics.failovers.inc({ upstream: c.upstream }),
    onHedge: (c) => metrics.hedges.inc({ upstream: c.upstream }),
  };
}
