/**
 * A key's request rate limit (`rate_limit_rpm`), as GCRA: one number per key,
 * the theoretical arrival time (`tat`) of its next request. Each request moves
 * it one emission interval (a minute / rpm) further; a request that would push
 * it more than a minute ahead of now is refused. It allows `rpm` requests in
 * any minute and bursts of up to `rpm` at once, exactly, with no window edges.
 * Pure: the store reads `tat` and writes the new one in the reserving
 * transaction, so every instance shares one limit.
 */
const MINUTE_MS = 60_000;

export type RateDecision =
  | { ok: true; tat: number }
  | { ok: false; retryAfterSeconds: number; message: string };

export function admitRequest(rpm: number | null, tat: number, now: number): RateDecision {
  if (rpm === null) return { ok: true, tat };
  const interval = MINUTE_MS / rpm;
  const tolerance = MINUTE_MS - interval;
  const start = Math.max(tat, now);
  if (start - now > tolerance) {
    return {
      ok: false,
      retryAfterSeconds: Math.max(1, Math.ceil((start - tolerance - now) / 1000)),
      message: `This key allows ${rpm} request${rpm === 1 ? '' : 's'} per minute.`,
    };
  }
  return { ok: true, tat: start + interval };
}
