/**
 * A circuit breaker per upstream (provider + model): after `failures` failures
 * in a row it opens for `cooldownMs`, and the router tries that upstream only
 * after the healthy ones. One success closes it.
 */
import type { Clock } from '../clock.js';
import type { BreakerHealth } from '../http/schemas/admin.js';

interface UpstreamHealth {
  consecutiveFailures: number;
  openUntil: number;
  successes: number;
  failures: number;
  lastError: string | null;
}

/** As GET /admin/v1/upstreams shows it. */
export type UpstreamHealthView = BreakerHealth;

export class Breaker {
  private readonly health = new Map<string, UpstreamHealth>();

  constructor(private readonly failures: number, private readonly cooldownMs: number, private readonly clock: Clock) {}

  isOpen(upstream: string): boolean {
    return (this.health.get(upstream)?.openUntil ?? 0) > this.clock.now().getTime();
  }

  /**
   * Open while cooling down; half-open once the cooldown has passed and the
   * upstream is on trial (its next result closes or reopens it); else closed.
   */
  stateOf(upstream: string): 'closed' | 'half_open' | 'open' {
    const h = this.health.get(upstream);
    if (!h || h.openUntil === 0) return 'closed';
    return h.openUntil > this.clock.now().getTime() ? 'open' : 'half_open';
  }

  recordSuccess(upstream: string): void {
    const h = this.entry(upstream);
    h.consecutiveFailures = 0;
    h.openUntil = 0;
    h.successes += 1;
  }

  recordFailure(upstream: string, error: string): void {
    const h = this.entry(upstream);
    h.consecutiveFailures += 1;
    h.failures += 1;
    h.lastError = error;
    if (h.consecutiveFailures >= this.failures) h.openUntil = this.clock.now().getTime() + this.cooldownMs;
  }

  /** Healthy upstreams first, in their order; open ones after, as a last resort. */
  order<T extends { upstream: string }>(candidates: T[]): T[] {
    const open = candidates.filter((c) => this.isOpen(c.upstream));
    return [...candidates.filter((c) => !this.isOpen(c.upstream)), ...open];
  }

  view(upstreams: string[]): UpstreamHealthView[] {
    return upstreams.map((upstream) => {
      const h = this.health.get(upstream);
      const open = this.isOpen(upstream);
      return {
        upstream,
        state: open ? 'open' : 'closed',
        consecutive_failures: h?.consecutiveFailures ?? 0,
        open_until: open && h ? new Date(h.openUntil).toISOString() : null,
        successes: h?.successes ?? 0,
        failures: h?.failures ?? 0,
        last_error: h?.lastError ?? null,
      };
    });
  }

  private entry(upstream: string): UpstreamHealth {
    let h = this.health.get(upstream);
    if (!h) {
      h = { consecutiveFailures: 0, openUntil: 0, successes: 0, failures: 0, lastError: null };
      this.health.set(upstream, h);
    }
    return h;
  }
}
