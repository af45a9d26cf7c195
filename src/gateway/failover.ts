/**
 * Tries candidates in order until one answers. An attempt fails over when it
 * fails before anything reached the client: a connection error, an error
 * status, a malformed answer, or no first byte within the timeout. Every
 * failure is collected; when all fail, one 502 (or 504 if all timed out).
 */
import { errors, GatewayError } from '../errors.js';
import type { UpstreamEvent, UpstreamRequest } from '../providers/types.js';
import { UpstreamError } from '../providers/types.js';
import type { Breaker } from './breaker.js';
import type { Candidate } from './router.js';

export interface FailoverOptions {
  signal: AbortSignal;
  firstByteTimeoutMs: number;
  /** Start the next candidate alongside when the current one is silent this long. */
  hedgeAfterMs?: number;
  breaker: Breaker;
  /** An attempt's outcome and how long it took (ok: to its first content; else: to its failure). */
  onAttempt?: (candidate: Candidate, outcome: 'ok' | UpstreamError['failure'], elapsedMs: number) => void;
  /** A failed attempt handed the request over to the next candidate. */
  onFailover?: (failed: Candidate) => void;
  /** A candidate started alongside a silent one. */
  onHedge?: (started: Candidate) => void;
}

export interface Served<T> {
  candidate: Candidate;
  result: T;
  /** When the winning attempt started (performance.now()). */
  startedAt: number;
}

/** A stream that has produced its first content: from here on, failures reach the client. */
export interface OpenedStream {
  first: UpstreamEvent[];
  rest: AsyncIterator<UpstreamEvent>;
  /** Aborts the upstream request. */
  cancel(): void;
}

type Attempt<T> = (candidate: Candidate, signal: AbortSignal, firstByte: () => void) => Promise<T>;

/** A request for whichever route serves: each candidate adds its model and how that model takes parameters. */
export type RouteRequest = Omit<UpstreamRequest, 'model' | 'params'>;

export function openStreamWithFailover(
  candidates: Candidate[], request: RouteRequest, options: FailoverOptions,
): Promise<Served<OpenedStream>> {
  return runFailover(candidates, options, async (c, signal, firstByte) => {
    const iterator = c.provider.stream({ ...request, model: c.model, params: c.params }, { signal, onFirstByte: () => {} })[Symbol.asyncIterator]();
    const first: UpstreamEvent[] = [];
    try {
      // Nothing is sent to the client until content (or the end) arrives.
      for (;;) {
        const next = await iterator.next();
        if (next.done) throw new UpstreamError('malformed', 'stream ended without content or finish');
        first.push(next.value);
        if (next.value.type !== 'usage') break;
      }
    } catch (err) {
      await iterator.return?.().catch(() => undefined);
      throw err;
    }
    firstByte();
    return { first, rest: iterator, cancel: () => void iterator.return?.().catch(() => undefined) };
  }, (loser) => loser.cancel());
}

/**
 * Candidates start in order. Without hedging the next starts only when one
 * fails; with `hedgeAfterMs`, also when the newest has sent no first byte by
 * then, running alongside. The first attempt to succeed wins and the others
 * are aborted.
 */
function runFailover<T>(candidates: Candidate[], options: FailoverOptions, attempt: Attempt<T>, dispose?: (loser: T) => void): Promise<Served<T>> {
  if (options.signal.aborted) return Promise.reject(new UpstreamError('aborted', 'the client went away'));
  return new Promise((resolve, reject) => {
    const failures: Array<{ upstream: string; error: UpstreamError }> = [];
    const live = new Set<AbortController>();
    let next = 0;
    let decided = false;

    const decide = (outcome: () => void) => {
      decided = true;
      for (const controller of live) controller.abort();
      outcome();
    };
    const launch = (): void => {
      if (decided) return;
      const candidate = candidates[next++];
      if (!candidate) {
        if (live.size === 0) decide(() => reject(allFailed(failures)));
        return;
      }
      const startedAt = performance.now();
      const controller = new AbortController();
      live.add(controller);
      const hedgeNext = () => {
        if (!decided && candidates[next]) options.onHedge?.(candidates[next]!);
        launch();
      };
      const hedge = options.hedgeAfterMs === undefined || next >= candidates.length ? null : setTimeout(hedgeNext, options.hedgeAfterMs);
      const stopHedge = () => hedge && clearTimeout(hedge);
      attemptWithTimeout(candidate, options, attempt, controller, stopHedge).then(
        (result) => {
          stopHedge();
          live.delete(controller);
          if (decided) return dispose?.(result);
          options.breaker.recordSuccess(candidate.upstream);
          options.onAttempt?.(candidate, 'ok', performance.now() - startedAt);
          decide(() => resolve({ candidate, result, startedAt }));
        },
        (err: unknown) => {
          stopHedge();
          live.delete(controller);
          if (decided) return;
          // Anything but an UpstreamError is the gateway's own failure to make this attempt.
          const error = err instanceof UpstreamError ? err : new UpstreamError('request', 'the adapter failed', { cause: err });
          options.onAttempt?.(candidate, error.failure, performance.now() - startedAt);
          if (options.signal.aborted) return decide(() => reject(new UpstreamError('aborted', 'the client went away')));
          if (countsAgainst(error)) options.breaker.recordFailure(candidate.upstream, `${error.failure}: ${error.message}`);
          failures.push({ upstream: candidate.upstream, error });
          if (next < candidates.length) options.onFailover?.(candidate);
          launch();
        },
      );
    };
    launch();
  });
}

async function attemptWithTimeout<T>(
  candidate: Candidate, options: FailoverOptions, attempt: Attempt<T>, controller: AbortController, onFirstByte: () => void,
): Promise<T> {
  const abort = () => controller.abort();
  options.signal.addEventListener('abort', abort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort();
  }, options.firstByteTimeoutMs);
  try {
    // On success the link to the caller's signal stays: a stream goes on using it.
    return await attempt(candidate, controller.signal, () => {
      clearTimeout(timer);
      onFirstByte();
    });
  } catch (err) {
    options.signal.removeEventListener('abort', abort);
    if (timedOut) throw new UpstreamError('timeout', `no first byte within ${options.firstByteTimeoutMs} ms`, { cause: err });
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Whether a failure speaks of the upstream's health. Not: a request the gateway
 * could not build, nor a 400-class refusal of this one request (400, 413,
 * 422…), as opposed to our key (401, 403), model (404) or rate (408, 429).
 */
function countsAgainst(error: UpstreamError): boolean {
  if (error.failure === 'request') return false;
  const status = error.status ?? 0;
  return !(error.failure === 'status' && status >= 400 && status < 500 && ![401, 403, 404, 408, 429].includes(status));
}

/** One error for the caller, in the gateway's own words; which upstream did what goes to the log through `cause`. */
function allFailed(failures: Array<{ upstream: string; error: UpstreamError }>): GatewayError {
  const detail = failures.map((f) => `${f.upstream}: ${describe(f.error)} (${f.error.message})`).join('; ');
  const cause = new AggregateError(failures.map((f) => f.error), `every route failed: ${detail || 'no route'}`);
  if (failures.length > 0 && failures.every((f) => f.error.failure === 'request')) {
    return new GatewayError({
      status: 400, type: 'invalid_request_error', code: 'invalid_value', param: null, cause,
      message: 'This request could not be sent to any route of the model.',
    });
  }
  const allTimedOut = failures.length > 0 && failures.every((f) => f.error.failure === 'timeout');
  return allTimedOut
    ? errors.upstreamTimeout('Every upstream timed out.', cause)
    : errors.upstreamUnavailable(failures.length === 0 ? 'No upstream is configured for this model.' : 'Every upstream failed.', cause);
}

function describe(error: UpstreamError): string {
  switch (error.failure) {
    case 'status': return `answered HTTP ${error.status ?? '?'}`;
    case 'timeout': return 'timed out';
    case 'connection': return 'connection failed';
    case 'malformed': return 'malformed answer';
    case 'aborted': return 'aborted';
    case 'request': return 'request not buildable';
  }
}
