/**
 * One chat completion, from checked request to settled charge:
 * check (model, context) → reserve → route with failover → settle.
 * A rejected request never touches the ledger; a request that delivered
 * nothing is released at no charge.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../clock.js';
import { errors, GatewayError } from '../errors.js';
import { newId } from '../ids.js';
import { countPromptTokens, countTextTokens } from '../metering/tokens.js';
import { creditsFor, planReservation } from '../metering/pricing.js';
import type { Metrics } from '../metrics.js';
import type { TokenUsage, ToolCall, UpstreamEvent, UpstreamRequest } from '../providers/types.js';
import { UpstreamError } from '../providers/types.js';
import type { Delivered, SettleRequest, SettleResult, Store, StoredResponse } from '../store/types.js';
import type { Breaker } from './breaker.js';
import type { Catalog, CatalogEntry } from './catalog.js';
import { openStreamWithFailover, type RouteRequest } from './failover.js';
import { unhonoured } from './route-params.js';
import { Lease } from './lease.js';
import type { Candidate, RoutePlan, Router } from './router.js';
import { secondsToUtcMidnight } from '../clock.js';
import type { ChatCompletion, ChatRequest, StoredCompletion, Svc, WireToolCall } from './chat-types.js';
import { Answer } from './answer.js';
import { readAnswer } from './read-answer.js';
import { RequestWatch } from './request-watch.js';

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
}

export type StreamOutput =
  | { type: 'ping' }
  | { type: 'delta'; content: string }
  | Extract<UpstreamEvent, { type: 'tool_call' }>
  | { type: 'end'; completion: ChatCompletion }
  | { type: 'error'; error: GatewayError; completion: ChatCompletion };

/** Upstream prompt counts are believed up to this multiple of the gateway's estimate (plus the slack): tokenizers differ, not tenfold. */
const PROMPT_TRUST = 2;
const PROMPT_SLACK = 64;

/** How long a stream waits in silence before it sends `: ping`. */
const PING_INTERVAL_MS = 1000;

/** A settlement the database refused is tried this many times (each already waits out a busy lock), this far apart. */
const SETTLE_ATTEMPTS = 3;
const SETTLE_RETRY_MS = 250;

export class CompletionService {
  constructor(private readonly deps: CompletionDeps) {}

  /** Model, then context: the checks that need no database. */
  check(request: ChatRequest): CheckedRequest {
    const entry = this.deps.catalog.get(request.model);
    if (!entry) throw errors.modelNotFound(request.model);
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
      lease: Lease.start(store, reservationId, leaseMs),
      idempotent: idempotencyKey !== null,
    };
  }

  /**
   * A JSON completion. The upstream is streamed and gathered here, so that the
   * first-byte timeout means the same in both modes (a non-streaming upstream
   * sends no byte until it has written the whole answer). Nothing reaches the
   * client before the end, so any failure costs nothing.
   */
  async complete(admission: Admission, signal: AbortSignal, arrivedAt: number): Promise<ChatCompletion> {
    const watch = this.watch(signal, arrivedAt);
    try {
      const { candidate, result: upstream } = await openStreamWithFailover(
        admission.plan.candidates, this.upstreamRequest(admission), this.failoverOptions(watch.signal),
      ).catch((err: unknown) => { throw watch.explainOpening(err); });
      const answer = new Answer();
      try {
        for await (const _ of readAnswer(upstream, answer, watch, admission.maxOutput));
      } catch (err) {
        throw err instanceof UpstreamError ? watch.explainMidAnswer(err) : err;
      }
      const tokens = this.meteredUsage(admission, answer.usage, answer.outputText);
      const svc = await this.settle(admission, candidate, tokens, arrivedAt,
        (settledSvc) => ({ status: 200, body: this.completion(admission, answer, tokens, settledSvc) }));
      return this.completion(admission, answer, tokens, svc);
    } catch (err) {
      await this.releaseQuietly(admission);
      throw err;
    } finally {
      watch.dispose();
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
        await this.releaseQuietly(admission);
      }
    }
    const { candidate, result: upstream } = opened;
    const answer = new Answer();
    // From the first content on, each lease renewal records what was delivered, for a sweeper should this process fail to settle.
    admission.lease.track(() => (answer.delivered ? this.delivered(admission, candidate, answer) : null));
    let failure: GatewayError | null = null;
    let settled: { tokens: TokenUsage; svc: Svc } | undefined;
    try {
      for await (const out of readAnswer(upstream, answer, watch, admission.maxOutput)) {
        if (out.type === 'delta' && out.content) yield out;
        else if (out.type === 'tool_call') yield out;
      }
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
      failure = watch.explainMidAnswer(err);
    } finally {
      // Every exit passes here, the client leaving too: charge what was delivered,
      // by the upstream's count only when it finished and reported one; nothing delivered costs nothing.
      if (!answer.delivered) {
        await this.releaseQuietly(admission);
      } else {
        const tokens = this.meteredUsage(admission, answer.finishReason !== null && !failure ? answer.usage : null, answer.outputText);
        const svc = await this.settle(admission, candidate, tokens, arrivedAt, (settledSvc) => ({
          status: 200, body: this.stored(this.completion(admission, answer, tokens, settledSvc), failure),
        }));
        settled = { tokens, svc };
      }
    }
    if (!settled) throw failure ?? errors.upstreamUnavailable('The upstream ended the stream without content.');
    const completion = this.completion(admission, answer, settled.tokens, settled.svc);
    yield failure ? { type: 'error', error: failure, completion } : { type: 'end', completion };
  }

  /**
   * Charges the request. The lease keeps the hold alive while the database is
   * asked again; if it still refuses, the lease's last record of what was
   * delivered stays for a sweeper to settle (a stream's delivered content is
   * never released unpaid). With an Idempotency-Key, `respond` builds the stored
   * response inside the settling transaction.
   */
  private async settle(
    admission: Admission, candidate: Candidate, tokens: TokenUsage, arrivedAt: number, respond: (svc: Svc) => StoredResponse,
  ): Promise<Svc> {
    let svc: Svc | null = null;
    const svcOf = (result: SettleResult): Svc => (svc = this.svc(admission, candidate, result, arrivedAt));
    const result = await this.settleDurably(admission, {
      reservationId: admission.reservationId,
      credits: creditsFor(tokens.promptTokens, tokens.completionTokens, admission.entry.pricing),
      promptTokens: tokens.promptTokens, completionTokens: tokens.completionTokens, routedModel: candidate.model,
      ...(admission.idempotent && { respond: (settled: SettleResult) => respond(svcOf(settled)) }),
    });
    this.deps.metrics.creditsCharged.inc({ model: admission.entry.id }, result.charged);
    return svc ?? svcOf(result);
  }

  private async settleDurably(admission: Admission, request: SettleRequest): Promise<SettleResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await this.deps.store.settle(request);
        admission.lease.stop();
        return result;
      } catch (err) {
        if (attempt >= SETTLE_ATTEMPTS) {
          await admission.lease.renew().catch(() => false);
          admission.lease.stop();
          throw err;
        }
        await sleep(SETTLE_RETRY_MS * attempt);
      }
    }
  }

  private svc(admission: Admission, candidate: Candidate, result: SettleResult, arrivedAt: number): Svc {
    return {
      requested_model: admission.entry.id,
      routed_model: candidate.model,
      credits_used: result.charged,
      balance_remaining: result.balanceRemaining,
      latency_ms: Math.max(0, Math.round(this.deps.clock.now().getTime() - arrivedAt)),
      provider: candidate.provider.id,
      ...(admission.plan.auto ? { auto: admission.plan.auto } : {}),
    };
  }

  /** What a stream has delivered so far, as a sweeper would charge it. */
  private delivered(admission: Admission, candidate: Candidate, answer: Answer): Delivered {
    const tokens = this.meteredUsage(admission, null, answer.outputText);
    return {
      credits: creditsFor(tokens.promptTokens, tokens.completionTokens, admission.entry.pricing),
      promptTokens: tokens.promptTokens, completionTokens: tokens.completionTokens, routedModel: candidate.model,
    };
  }

  /** A completion as kept under an Idempotency-Key: a stream that failed midway keeps the error that ended it. */
  private stored(completion: ChatCompletion, failure: GatewayError | null): StoredCompletion {
    return failure ? { ...completion, error: failure.toBody().error } : completion;
  }

  private async releaseQuietly(admission: Admission): Promise<void> {
    admission.lease.stop();
    // If even this fails, the lease lapses and the sweeper releases the hold.
    await this.deps.store.release(admission.reservationId).catch(() => undefined);
  }

  /**
   * The tokens to bill: the upstream's count when it gave one, else the
   * gateway's own. Never more output than the `max_tokens` sent, nor a prompt
   * far beyond the gateway's estimate: a broken upstream cannot drain an account.
   */
  private meteredUsage(admission: Admission, reported: TokenUsage | null, output: string): TokenUsage {
    const usage = reported ?? { promptTokens: admission.promptTokens, completionTokens: countTextTokens(output, admission.maxOutput) };
    return {
      promptTokens: Math.min(usage.promptTokens, admission.promptTokens * PROMPT_TRUST + PROMPT_SLACK),
      completionTokens: Math.min(usage.completionTokens, admission.maxOutput),
    };
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
    return {
      signal,
      firstByteTimeoutMs: this.deps.firstByteTimeoutMs,
      hedgeAfterMs: this.deps.hedgeAfterMs,
      breaker: this.deps.breaker,
      onAttempt: (c: Candidate, outcome: string) => this.deps.metrics.upstreamAttempts.inc({ upstream: c.upstream, outcome }),
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
      },
      svc,
    };
  }
}

export function toWireToolCall(call: ToolCall): WireToolCall {
  return { id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } };
}

/**
 * The plan without the routes that cannot honour the request (a field their
 * model refuses or their provider cannot carry): skipped, never served without
 * it. When none can, a 400 names the field.
 */
function honouring(plan: RoutePlan, request: ChatRequest): RoutePlan {
  const probe = routeRequest(request, request.maxTokens ?? 1);
  let refused: string | null = null;
  const candidates = plan.candidates.filter((candidate) => {
    const field = unhonoured(candidate, probe);
    refused ??= field;
    return field === null;
  });
  if (candidates.length === 0 && refused !== null) {
    throw errors.invalidValue(refused, `No route of this model can honour "${refused}"; leave it out or choose another model.`);
  }
  return { ...plan, candidates };
}

/** The request as every route gets it, with the output bound the reservation allows. */
function routeRequest(r: ChatRequest, maxTokens: number): RouteRequest {
  return {
    messages: r.messages, maxTokens, temperature: r.temperature, topP: r.topP, callerSet: r.callerSet,
    stop: r.stop, seed: r.seed, presencePenalty: r.presencePenalty, frequencyPenalty: r.frequencyPenalty,
    user: r.user, responseFormat: r.responseFormat, tools: r.tools, toolChoice: r.toolChoice, parallelToolCalls: r.parallelToolCalls,
  };
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

