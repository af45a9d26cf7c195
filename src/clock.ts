/** Time, injected so that tests can move it; everything reads the clock through this. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

const DAY_MS = 86_400_000;

/** `YYYY-MM-DD` of the UTC day that holds `at`. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** Whole seconds until the next 00:00 UTC (at least 1). */
export function secondsToUtcMidnight(at: Date): number {
  const next = Math.floor(at.getTime() / DAY_MS) * DAY_MS + DAY_MS;
  return Math.max(1, Math.ceil((next - at.getTime()) / 1000));
}

/** ISO 8601 UTC with `Z` and whole seconds, as the contract writes times. */
export function isoSeconds(at: Date): string {
  return at.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
