/**
 * What the router has seen lately, kept in this process's memory only (each
 * instance has its own): per upstream the outcome and latency of its last
 * attempts, and per alias the requests of each minute of the last hour.
 * Behind GET /admin/v1/upstreams and GET /admin/v1/traffic, and the dashboard.
 */
import type { Clock } from '../clock.js';

const MINUTE_MS = 60_000;

export interface AttemptStats {
  /** Attempts in the window (the last `size` attempts, none older than `maxAgeMs`). */
  recent_attempts: number;
  recent_failures: number;
  /** Failures / attempts in the window; null with no attempt. */
  recent_error_rate: number | null;
  /** Time to the first byte (or to the failure) of the window's attempts, in ms. */
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
}

interface Attempt {
  at: number;
  ok: boolean;
  latencyMs: number;
}

/** A sliding window per upstream: its last `size` attempts that are younger than `maxAgeMs`. */
export class UpstreamStats {
  private readonly attempts = new Map<string, Attempt[]>();

  constructor(private readonly clock: Clock, private readonly size = 100, private readonly maxAgeMs = 5 * MINUTE_MS) {}

  record(upstream: string, ok: boolean, latencyMs: number): void {
    let list = this.attempts.get(upstream);
    if (!list) this.attempts.set(upstream, (list = []));
    list.push({ at: this.clock.now().getTime(), ok, latencyMs: Math.max(0, Math.round(latencyMs)) });
    if (list.length > this.size) list.splice(0, list.length - this.size);
  }

  view(upstream: string): AttemptStats {
    const since = this.clock.now().getTime() - this.maxAgeMs;
    const recent = (this.attempts.get(upstream) ?? []).filter((a) => a.at >= since);
    const failures = recent.filter((a) => !a.ok).length;
    const latencies = recent.map((a) => a.latencyMs).sort((a, b) => a - b);
    return {
      recent_attempts: recent.length,
      recent_failures: failures,
      recent_error_rate: recent.length === 0 ? null : failures / recent.length,
      latency_p50_ms: percentile(latencies, 0.5),
      latency_p95_ms: percentile(latencies, 0.95),
    };
  }
}

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)] ?? null;
}

export interface TrafficView {
  object: 'traffic';
  /** The first minute of the series (UTC, whole minute). */
  start: string;
  minutes: number;
  /** Each alias's requests per minute, oldest first, `minutes` values each. */
  by_alias: Record<string, number[]>;
}

/** Requests per minute by alias over the last `minutes` minutes: a ring of minute buckets per alias. */
export class AliasTraffic {
  private readonly rings = new Map<string, { counts: number[]; minuteOf: number[] }>();

  constructor(private readonly clock: Clock, private readonly minutes = 60) {}

  record(alias: string): void {
    const minute = Math.floor(this.clock.now().getTime() / MINUTE_MS);
    let ring = this.rings.get(alias);
    if (!ring) this.rings.set(alias, (ring = { counts: new Array<number>(this.minutes).fill(0), minuteOf: new Array<number>(this.minutes).fill(-1) }));
    const slot = minute % this.minutes;
    if (ring.minuteOf[slot] !== minute) {
      ring.minuteOf[slot] = minute;
      ring.counts[slot] = 0;
    }
    ring.counts[slot] = (ring.counts[slot] ?? 0) + 1;
  }

  view(): TrafficView {
    const now = Math.floor(this.clock.now().getTime() / MINUTE_MS);
    const first = now - this.minutes + 1;
    const byAlias: Record<string, number[]> = {};
    for (const [alias, ring] of [...this.rings].sort(([a], [b]) => a.localeCompare(b))) {
      byAlias[alias] = Array.from({ length: this.minutes }, (_, i) => {
        const minute = first + i;
        const slot = minute % this.minutes;
        return ring.minuteOf[slot] === minute ? ring.counts[slot] ?? 0 : 0;
      });
    }
    return { object: 'traffic', start: new Date(first * MINUTE_MS).toISOString().replace('.000Z', 'Z'), minutes: this.minutes, by_alias: byAlias };
  }
}
