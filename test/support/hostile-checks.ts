/**
 * What every answer to a hostile request must be, and the run's seed and size
 * (FC_SEED, FC_RUNS) for the property tests.
 */
import assert from 'node:assert/strict';
import type { RawResponse } from './raw-http.js';

/** The seed of every property in a run: FC_SEED, else a fixed one so that CI is reproducible. */
export const FC_SEED = process.env.FC_SEED === undefined ? 20261124 : Number(process.env.FC_SEED);
/** How many cases in all the hostile-request properties generate: FC_RUNS, default 10,400. */
export const FC_TOTAL_RUNS = process.env.FC_RUNS === undefined ? 10_400 : Number(process.env.FC_RUNS);

/** A share of FC_TOTAL_RUNS (at least one case). */
export function runs(share: number): number {
  return Math.max(1, Math.round(FC_TOTAL_RUNS * share));
}

/** The options of each fc.assert: the run's seed, and the counterexample printed with it on failure. */
export function fcOptions(numRuns: number): { seed: number; numRuns: number; includeErrorInReport: true } {
  return { seed: FC_SEED, numRuns, includeErrorInReport: true };
}

/** Asserts the contract's error body on a raw answer: JSON, exactly `error` with its four fields. */
export function assertErrorBody(res: RawResponse, what: string): void {
  assert.match(res.headers['content-type'] ?? '', /^application\/json/, `${what}: error content type`);
  assert.match(res.headers['x-request-id'] ?? '', /^[\w.:-]{1,128}$/, `${what}: x-request-id`);
  const body = JSON.parse(res.body.toString('utf8')) as { error?: Record<string, unknown> };
  assert.deepEqual(Object.keys(body), ['error'], what);
  const error = body.error!;
  assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], what);
  assert.equal(typeof error.message, 'string', what);
  assert.ok((error.message as string).length > 0, what);
  assert.doesNotMatch(error.message as string, /\n\s+at /, `${what}: no stack trace`);
  assert.equal(typeof error.type, 'string', what);
  assert.equal(typeof error.code, 'string', what);
  assert.ok(error.param === null || typeof error.param === 'string', what);
}

/**
 * Any answer to a hostile request: never a 5xx; a 4xx carries the error body;
 * a 2xx is well formed (JSON, or Prometheus text on /metrics; nothing on HEAD).
 */
export function assertHostileAnswer(res: RawResponse, what: string, options: { head?: boolean; refused?: boolean } = {}): void {
  const brief = `${what} -> ${res.status} ${res.body.subarray(0, 300).toString('utf8')}`;
  assert.ok(res.status < 500, `a 5xx: ${brief}`);
  if (options.refused) assert.ok(res.status >= 400, `must be refused: ${brief}`);
  if (options.head) return;
  if (res.status >= 400) {
    assertErrorBody(res, brief);
    return;
  }
  assert.ok(res.status >= 200 && res.status < 300, `unexpected status: ${brief}`);
  if (/^text\/plain/.test(res.headers['content-type'] ?? '')) return;
  assert.match(res.headers['content-type'] ?? '', /^application\/json/, brief);
  assert.doesNotThrow(() => JSON.parse(res.body.toString('utf8')), brief);
}
