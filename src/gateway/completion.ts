/**
 * One chat completion, from checked request to settled charge:
 * check (model, context) → reserve → route with failover → settle.
 * A rejected request never touches the ledger; a request that delivered
 * nothing is released at no charge.
 */
import type { Clock } from '../clock.js';
import { secondsToUtcMidnight } from '../clock.js';
import { errors, GatewayError } from '../errors.js';
import { newId } from '../ids.js';
import { countPromptTokens, countTextTokens } from '../metering/tokens.js';
import { planReservation } from '../metering/pricing.js';
import type { Metrics } from '../metrics.js';
import type { TokenUsage, ToolCall, UpstreamEvent } from '../providers/types.js';
import { UpstreamError } from '../providers/types.js';
import type { Store } from '../store/types.js';
import { Answer } from './answer.js';
import type { Breaker } from './breaker.js';
import type { Catalog, CatalogEntry } from './catalog.js';
import type { ChatCompletion, ChatRequest, Svc, WireToolCall } from './chat-types.js';
import { openStreamWithFailover, type OpenedStream, type RouteRequest, type Served } from './failover.js';
import { CompletionTrace, failoverMetrics } from './completion-trace.js';
import type { Lease, LeaseKeeper } from './lease.js';
import { readAnswer } from './read-answer.js';
import { RequestWatch } from './request-watch.js';
import { honouring, routeRequest } from './route-params.js';
import type { Candidate, RoutePlan, Router } from './router.js';
import { Settlement } from './settlement.js';
import type { AliasTraffic, UpstreamStats } from './traffic.js';

export interface CompletionDeps {
  store: Store;
  catalog: Catalog;
  router: Router;
  breaker: Breaker;
  clock: Clock;
  metrics: Metrics;
  firstByteTimeoutMs: number;
  hedgeAfterMs?: number;
  streamIdleTimeoutMs: number;
  maxRequestMs: number;
  leaseMs: number;
  /** The process's leases, all renewed together; its `leaseMs` is the one above. */
  leases: LeaseKeeper;
  /** What the operator's dashboard shows: attempts per upstream, requests per alias (this process only). */
  upstreamStats: UpstreamStats;
  traffic: AliasTraffic;
}

export interface Caller {
  accountId: string;
  keyId: string;
}

/** A request that passed the cheap checks; nothing is reserved yet. */
export interface CheckedRequest {
  request: ChatRequest;
  entry: CatalogEntry;
  plan: RoutePlan;
  promptTokens: number;
}

/** A request that holds credits: it must end in `settle` or `release`. */
export interface Admission extends CheckedRequest {
  id: string;
  created: number;
  reservationId: string;
  maxOutput: number;
  lease: Lease;
  /** Whether an Idempotency-Key claim rides on this reservation: its settlement stores the response. */
  idempotent: boolean;
  /** The hold and the serving upstream, for metrics and the completion log line. */
  trace: CompletionTrace;
}

export type StreamOutput =
  | { type: 'ping' }
  | { type: 'delta'; content: string }
  | Extract<UpstreamEvent, { type: 'tool_call' }>
  | { type: 'end'; completion: ChatCompletion }
  | { type: 'error'; error: GatewayError; completion: ChatCompletion };

/** How long a stream waits in silence before it sends `: ping`. */
const PING_INTERVAL_MS = 1000;


export class CompletionService {
  private readonly settlement: Settlement;

  constructor(private readonly deps: CompletionDeps) {
    this.settlement = new Settlement(deps);
  }

  /** Model, then context: the checks that need no database. */
  check(request: ChatRequest): CheckedRequest {
    const entry = this.deps.catalog.get(request.model);
    if (!entry) throw errors.modelNotFound(request.model);
    this.deps.traffic.record(entry.id);
    // Counting stops past the window: an oversized prompt costs no more than a full one.
    const promptTokens = countPromptTokens(request.messages, entry.contextWindow)
      + (request.tools ? countTextTokens(JSON.stringify(request.tools), entry.contextWindow) : 0);
    const needed = promptTokens + (request.maxTokens ?? 1);
    if (needed > entry.contextWindow) throw contextExceeded(entry.contextWindow, promptTokens, request.maxTokens);
    const routed = this.deps.router.plan(entry, request.messages, needed);
    // svc-auto may find no class whose alias holds the prompt.
    const window = routed.auto ? this.deps.catalog.get(routed.auto.alias)!.contextWindow : entry.contextWindow;
    if (needed > window) throw contextExceeded(window, promptTokens, request.maxTokens);
    return { request, entry, plan: honouring(routed, request), promptTokens };
  }

  /** Daily cap, then credits, decided by the database in one transaction. */
  async reserve(caller: Caller, checked: CheckedRequest, idempotencyKey: string | null = null): Promise<Admission> {
    const { store, clock, leaseMs } = this.deps;
    const reservationId = newId('res');
    const contextWindow = this.servingWindow(checked);
    const outcome = await store.reserve(
      {
        reservationId, accountId: caller.accountId, keyId: caller.keyId, model: checked.entry.id, leaseMs,
        ...(idempotencyKey !== null && { idempotencyKey }),
      },
      planReservation({ promptTokens: checked.promptTokens, maxTokens: checked.request.maxTokens, contextWindow, pricing: checked.entry.pricing }),
    );
    if (!outcome.ok) {
      if (outcome.reason === 'rate_limit') throw errors.rateLimited(outcome.message, outcome.retryAfterSeconds);
      throw outcome.reason === 'daily_cap'
        ? errors.dailyCapReached(outcome.message, secondsToUtcMidnight(clock.now()))
        : errors.insufficientCredits(outcome.message);
    }
    return {
      ...checked,
      id: newId('chatcmpl'),
      created: Math.floor(clock.now().getTime() / 1000),
      reservationId,
      maxOutput: outcome.maxOutput,
      lease: this.deps.leases.start(reservationId),
      idempotent: idempotencyKey !== null,
      trace: new CompletionTrace(this.deps.metrics, checked.entry.id, outcome.amount),
    };
  }

  /**
   * A JSON completion. The upstream is streamed and gathered here, so that the
   * first-byte timeout means the same in both modes (a non-streaming upstream
   * sends no byte until it has written the whole answer). Nothing reaches the
   * client before the end, so any failure costs nothing, and a route that dies
   * midway is followed by the next one, from the start.
   */
  async complete(admission: Admission, signal: AbortSignal, arrivedAt: number): Promise<ChatCompletion> {
    const watch = this.watch(signal, arrivedAt);
    try {
      const { candidate, answer } = await this.gatherAnswer(admission, watch);
      const tokens = this.settlement.meteredUsage(admission, answer.usage, answer.outputText);
      const svc = await this.settlement.settle(admission, [candidate], tokens, arrivedAt,
        (settledSvc) => ({ status: 200, body: this.completion(admission, answer, tokens, settledSvc) }));
      return this.completion(admission, answer, tokens, svc);
    } catch (err) {
      await this.settlement.release(admission);
      throw err;
    } finally {
      watch.dispose();
    }
  }

  /** The first whole answer of the routes in order; a route that fails before or during its answer hands over to the next. */
  private async gatherAnswer(admission: Admission, watch: RequestWatch): Promise<{ candidate: Candidate; answer: Answer }> {
    for (let candidates = admission.plan.candidates; ;) {
      const served = await openStreamWithFailover(candidates, this.upstreamRequest(admission), this.failoverOptions(watch.signal))
        .catch((err: unknown) => { throw watch.explainOpening(err); });
      const { candidate, result: upstream } = served;
      admission.trace.opened(served);
      const answer = new Answer();
      try {
        for await (const _ of readAnswer(upstream, answer, watch, admission.maxOutput));
        admission.trace.answerEnded(served, 'ok');
        return { candidate, answer };
      } catch (err) {
        if (!(err instanceof UpstreamError)) throw err;
        admission.trace.answerEnded(served, err.failure);
        candidates = candidates.slice(candidates.indexOf(candidate) + 1);
        if (watch.stopped !== null || candidates.length === 0) throw watch.explainMidAnswer(err);
        this.deps.metrics.failovers.inc({ upstream: candidate.upstream });
      }
    }
  }

  /**
   * A streamed completion. It always ends in one `end` or `error` output that
   * carries the settled completion, also when the client left (then nobody
   * reads it, but an Idempotency-Key keeps it).
   */
  async *stream(admission: Admission, signal: AbortSignal, arrivedAt: number): AsyncGenerator<StreamOutput> {
    const watch = this.watch(signal, arrivedAt);
    try {
      yield* this.streamWatched(admission, watch, arrivedAt);
    } finally {
      watch.dispose();
    }
  }

  private async *streamWatched(admission: Admission, watch: RequestWatch, arrivedAt: number): AsyncGenerator<StreamOutput> {
    const opening = openStreamWithFailover(admission.plan.candidates, this.upstreamRequest(admission), this.failoverOptions(watch.signal))
      .catch((err: unknown) => { throw watch.explainOpening(err); });
    let opened: Awaited<typeof opening> | null = null;
    try {
      while (!(opened = await raceTimer(opening, PING_INTERVAL_MS))) yield { type: 'ping' };
    } finally {
      if (!opened) {
        // Failed over to nothing, or the consumer left during pings: let go of the hold and any late stream.
        opening.then((late) => late.result.cancel(), () => undefined);
        await this.settlement.release(admission);
      }
    }
    let served: Served<OpenedStream> = opened;
    let { candidate, result: upstream } = served;
    admission.trace.opened(served);
    const answer = new Answer();
    /** Every route that contributed to the answer, in order: more than one when an answer was continued. */
    const routes = [candidate];
    // From the first content on, each lease renewal records what was delivered, for a sweeper should this process fail to settle.
    admission.lease.track(() => (answer.delivered ? this.settlement.delivered(admission, candidate, answer) : null));
    let failure: GatewayError | null = null;
    let settled: { tokens: TokenUsage; svc: Svc } | undefined;
    try {
      for (;;) {
        try {
          for await (const out of readAnswer(upstream, answer, watch, admission.maxOutput)) {
            if (out.type === 'delta' && out.content) yield out;
            else if (out.type === 'tool_call') yield out;
          }
          admission.trace.answerEnded(served, 'ok');
          failure = null;
          break;
        } catch (err) {
          if (!(err instanceof UpstreamError)) throw err;
          admission.trace.answerEnded(served, err.failure);
          failure = watch.explainMidAnswer(err);
        }
        // The route died after content reached the client: a following route that can continue the answer does.
        const next = yield* this.continuation(admission, watch, answer, candidate);
        if (!next) break;
        this.deps.metrics.failovers.inc({ upstream: candidate.upstream });
        served = next;
        ({ candidate, result: upstream } = next);
        admission.trace.opened(next);
        routes.push(candidate);
      }
    } finally {
      // Every exit passes here, the client leaving too: charge what was delivered,
      // by the upstream's count only when one route finished and reported it; nothing delivered costs nothing.
      if (!answer.delivered) {
        await this.settlement.release(admission);
      } else {
        const reported = answer.finishReason !== null && !failure && routes.length === 1 ? answer.usage : null;
        const tokens = this.settlement.meteredUsage(admission, reported, answer.outputText);
        const svc = await this.settlement.settle(admission, routes, tokens, arrivedAt, (settledSvc) => ({
          status: 200, body: this.settlement.stored(this.completion(admission, answer, tokens, settledSvc), failure),
        }));
        settled = { tokens, svc };
      }
    }
    if (!settled) throw failure ?? errors.upstreamUnavailable('The upstream ended the stream without content.');
    const completion = this.completion(admission, answer, settled.tokens, settled.svc);
    yield failure ? { type: 'error', error: failure, completion } : { type: 'end', completion };
  }

  /**
   * Opens the continuation of an answer that broke off on `after`: the
   * conversation plus the text delivered so far as an assistant prefix, on the
   * routes after it that can continue one, with pings while it waits. Null when
   * there is none (a tool call was under way, the client or the deadline ended
   * the request, nothing is left of the output bound), or every one failed.
   */
  private async *continuation(
    admission: Admission, watch: RequestWatch, answer: Answer, after: Candidate,
  ): AsyncGenerator<StreamOutput, Served<OpenedStream> | null> {
    if (watch.stopped === 'client' || watch.stopped === 'deadline' || answer.toolCalls.length > 0 || answer.content === '') return null;
    const candidates = admission.plan.candidates;
    const continuing = candidates.slice(candidates.indexOf(after) + 1).filter((c) => c.provider.continues(c.params));
    const left = admission.maxOutput - countTextTokens(answer.content, admission.maxOutput);
    if (continuing.length === 0 || left <= 0) return null;
    const request = { ...routeRequest(admission.request, left), prefix: answer.content };
    const opening = openStreamWithFailover(continuing, request, this.failoverOptions(watch.signal));
    let opened: Served<OpenedStream> | null = null;
    try {
      while (!(opened = await raceTimer(opening, PING_INTERVAL_MS))) yield { type: 'ping' };
    } catch {
      return null;
    } finally {
      if (!opened) opening.then((late) => late.result.cancel(), () => undefined);
    }
    return opened;
  }

  /** The window of the alias that serves: svc-auto's target may be smaller than svc-auto's own. */
  private servingWindow(checked: CheckedRequest): number {
    const target = checked.plan.auto ? this.deps.catalog.get(checked.plan.auto.alias)! : checked.entry;
    return Math.min(checked.entry.contextWindow, target.contextWindow);
  }

  private upstreamRequest(admission: Admission): RouteRequest {
    return routeRequest(admission.request, admission.maxOutput);
  }

  private watch(signal: AbortSignal, arrivedAt: number): RequestWatch {
    const { maxRequestMs, streamIdleTimeoutMs, clock } = this.deps;
    return new RequestWatch(signal, {
      remainingMs: arrivedAt + maxRequestMs - clock.now().getTime(), maxRequestMs, idleMs: streamIdleTimeoutMs,
    });
  }

  private failoverOptions(signal: AbortSignal) {
    const traced = failoverMetrics(this.deps.metrics);
    return {
      signal,
      firstByteTimeoutMs: this.deps.firstByteTimeoutMs,
      hedgeAfterMs: this.deps.hedgeAfterMs,
      breaker: this.deps.breaker,
      ...traced,
      onAttempt: (c: Candidate, outcome: 'ok' | UpstreamError['failure'], elapsedMs: number) => {
        traced.onAttempt?.(c, outcome, elapsedMs);
        // A client that went away says nothing of the upstream.
        if (outcome !== 'aborted') this.deps.upstreamStats.record(c.upstream, outcome === 'ok', elapsedMs);
      },
    };
  }

  private completion(admission: Admission, answer: Answer, tokens: TokenUsage, svc: Svc): ChatCompletion {
    const calls = answer.toolCalls;
    const message: ChatCompletion['choices'][number]['message'] = calls.length === 0
      ? { role: 'assistant', content: answer.content }
      : { role: 'assistant', content: answer.content === '' ? null : answer.content, tool_calls: calls.map(toWireToolCall) };
    return {
      id: admission.id,
      object: 'chat.completion',
      created: admission.created,
      model: admission.entry.id,
      choices: [{ index: 0, message, finish_reason: answer.finishReason ?? 'stop' }],
      usage: {
        prompt_tokens: tokens.promptTokens,
        completion_tokens: tokens.completionTokens,
        total_tokens: tokens.promptTokens + tokens.completionTokens,
        // In OpenAI's own shape: cached and reasoning tokens are inside the counts above, which are what is billed.
        ...(tokens.cachedTokens !== undefined && { prompt_tokens_details: { cached_tokens: tokens.cachedTokens } }),
        ...(tokens.reasoningTokens !== undefined && { completion_tokens_details: { reasoning_tokens: tokens.reasoningTokens } }),
      },
      svc,
    };
  }
}

export function toWireToolCall(call: ToolCall): WireToolCall {
  return { id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } };
}

function contextExceeded(window: number, promptTokens: number, maxTokens: number | null): GatewayError {
  const prompt = promptTokens > window ? `more than ${window}` : String(promptTokens);
  return errors.contextLengthExceeded(`This model's context window is ${window} tokens; the messages take ${prompt}` +
    (maxTokens === null ? ' with no room left for output.' : ` and max_tokens asks for ${maxTokens} more.`));
}

async function raceTimer<T>(promise: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => { timer = setTimeout(() => resolve(null), ms); });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

