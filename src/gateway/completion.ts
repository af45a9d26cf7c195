/**
 * One chat completion, from checked request to settled charge:
 * check (model, context) → reserve → route with failover → settle.
 * A rejected request never touches the ledger; a request that delivered
 * nothing is released at no charge.
 */
import type { Clock } from '../clock.js';
import { errors, GatewayError } from '../errors.js';
import { newId } from '../ids.js';
import { countPromptTokens, countTextTokens } from '../metering/tokens.js';
import { creditsFor, planReservation } from '../metering/pricing.js';
import type { Metrics } from '../metrics.js';
import type { FinishReason, TokenUsage, UpstreamRequest } from '../providers/types.js';
import { UpstreamError } from '../providers/types.js';
import type { Store } from '../store/types.js';
import type { Breaker } from './breaker.js';
import type { Catalog, CatalogEntry } from './catalog.js';
import { completeWithFailover, openStreamWithFailover } from './failover.js';
import { Lease } from './lease.js';
import type { Candidate, RoutePlan, Router } from './router.js';
import { secondsToUtcMidnight } from '../clock.js';
import type { ChatCompletion, ChatRequest, Svc } from './chat-types.js';

export interface CompletionDeps {
  store: Store;
  catalog: Catalog;
  router: Router;
  breaker: Breaker;
  clock: Clock;
  metrics: Metrics;
  firstByteTimeoutMs: number;
  hedgeAfterMs?: number;
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
}

export type StreamOutput =
  | { type: 'ping' }
  | { type: 'delta'; content: string }
  | { type: 'end'; completion: ChatCompletion }
  | { type: 'error'; error: GatewayError; completion: ChatCompletion };

/** How long a stream waits in silence before it sends `: ping`. */
const PING_INTERVAL_MS = 1000;

export class CompletionService {
  constructor(private readonly deps: CompletionDeps) {}

  /** Model, then context: the checks that need no database. */
  check(request: ChatRequest): CheckedRequest {
    const entry = this.deps.catalog.get(request.model);
    if (!entry) throw errors.modelNotFound(request.model);
    const promptTokens = countPromptTokens(request.messages);
    const needed = promptTokens + (request.maxTokens ?? 1);
    if (needed > entry.contextWindow) {
      throw errors.contextLengthExceeded(
        `This model's context window is ${entry.contextWindow} tokens; the messages take ${promptTokens}` +
        (request.maxTokens === null ? ' with no room left for output.' : ` and max_tokens asks for ${request.maxTokens} more.`));
    }
    const plan = this.deps.router.plan(entry, request.messages, needed);
    return { request, entry, plan, promptTokens };
  }

  /** Daily cap, then credits, decided by the database in one transaction. */
  async reserve(caller: Caller, checked: CheckedRequest): Promise<Admission> {
    const { store, clock, leaseMs } = this.deps;
    const reservationId = newId('res');
    const contextWindow = Math.min(checked.entry.contextWindow, this.servingWindow(checked));
    const outcome = await store.reserve(
      { reservationId, accountId: caller.accountId, keyId: caller.keyId, model: checked.entry.id, leaseMs },
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
    };
  }

  async complete(admission: Admission, signal: AbortSignal, arrivedAt: number): Promise<ChatCompletion> {
    try {
      const served = await completeWithFailover(admission.plan.candidates, this.upstreamRequest(admission), this.failoverOptions(signal));
      const { content, finishReason, usage } = served.result;
      const tokens = usage ?? this.countUsage(admission, content);
      const svc = await this.settle(admission, served.candidate, tokens, arrivedAt);
      return this.completion(admission, content, finishReason, tokens, svc);
    } catch (err) {
      await this.releaseQuietly(admission);
      throw err;
    }
  }

  async *stream(admission: Admission, signal: AbortSignal, arrivedAt: number): AsyncGenerator<StreamOutput> {
    let opened;
    try {
      const opening = openStreamWithFailover(admission.plan.candidates, this.upstreamRequest(admission), this.failoverOptions(signal));
      while (!(opened = await raceTimer(opening, PING_INTERVAL_MS))) yield { type: 'ping' };
    } catch (err) {
      await this.releaseQuietly(admission);
      throw err;
    }
    const { candidate, result: upstream } = opened;
    let content = '';
    let finishReason: FinishReason | null = null;
    let usage: TokenUsage | null = null;
    let failure: GatewayError | null = null;
    let settled: { tokens: TokenUsage; svc: Svc } | undefined;
    try {
      for (const pending = upstream.first.values(); ; ) {
        const step = await nextEvent(pending, upstream.rest);
        if (step.done) break;
        const e = step.value;
        if (e.type === 'delta' && e.content) {
          content += e.content;
          yield { type: 'delta', content: e.content };
        } else if (e.type === 'finish') finishReason = e.finishReason;
        else if (e.type === 'usage') usage = e.usage;
      }
    } catch (err) {
      if (!(err instanceof UpstreamError) || err.failure === 'aborted') throw err;
      failure = errors.upstreamUnavailable(`The upstream failed mid-stream: ${err.message}.`, err);
    } finally {
      upstream.cancel();
      // Every exit passes here, the client leaving too: charge what was delivered,
      // by the upstream's count only when it finished and reported one; nothing delivered costs nothing.
      if (content === '' && finishReason === null) {
        await this.releaseQuietly(admission);
      } else {
        const tokens = (finishReason !== null && !failure ? usage : null) ?? this.countUsage(admission, content);
        settled = { tokens, svc: await this.settle(admission, candidate, tokens, arrivedAt) };
      }
    }
    if (!settled) throw failure ?? errors.upstreamUnavailable('The upstream ended the stream without content.');
    const completion = this.completion(admission, content, finishReason ?? 'stop', settled.tokens, settled.svc);
    yield failure ? { type: 'error', error: failure, completion } : { type: 'end', completion };
  }

  private async settle(admission: Admission, candidate: Candidate, tokens: TokenUsage, arrivedAt: number): Promise<Svc> {
    admission.lease.stop();
    const credits = creditsFor(tokens.promptTokens, tokens.completionTokens, admission.entry.pricing);
    const result = await this.deps.store.settle({
      reservationId: admission.reservationId, credits, promptTokens: tokens.promptTokens,
      completionTokens: tokens.completionTokens, routedModel: candidate.model,
    });
    this.deps.metrics.creditsCharged.inc({ model: admission.entry.id }, result.charged);
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

  private async releaseQuietly(admission: Admission): Promise<void> {
    admission.lease.stop();
    // If even this fails, the lease lapses and the sweeper releases the hold.
    await this.deps.store.release(admission.reservationId).catch(() => undefined);
  }

  private countUsage(admission: Admission, content: string): TokenUsage {
    return { promptTokens: admission.promptTokens, completionTokens: countTextTokens(content) };
  }

  /** The smallest context window among the aliases that may serve (svc-auto's target). */
  private servingWindow(checked: CheckedRequest): number {
    const alias = checked.plan.auto ? this.deps.catalog.get(checked.plan.auto.alias) : checked.entry;
    return alias?.contextWindow ?? checked.entry.contextWindow;
  }

  private upstreamRequest(admission: Admission): Omit<UpstreamRequest, 'model'> {
    const r = admission.request;
    return {
      messages: r.messages, maxTokens: admission.maxOutput, temperature: r.temperature, topP: r.topP,
      stop: r.stop, seed: r.seed, presencePenalty: r.presencePenalty, frequencyPenalty: r.frequencyPenalty,
      user: r.user, responseFormat: r.responseFormat,
    };
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

  private completion(admission: Admission, content: string, finishReason: FinishReason, tokens: TokenUsage, svc: Svc): ChatCompletion {
    return {
      id: admission.id,
      object: 'chat.completion',
      created: admission.created,
      model: admission.entry.id,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: finishReason }],
      usage: {
        prompt_tokens: tokens.promptTokens,
        completion_tokens: tokens.completionTokens,
        total_tokens: tokens.promptTokens + tokens.completionTokens,
      },
      svc,
    };
  }
}

/** The events the failover loop already pulled, then the rest of the stream. */
async function nextEvent<T>(pending: Iterator<T>, rest: AsyncIterator<T>): Promise<IteratorResult<T>> {
  const buffered = pending.next();
  return buffered.done ? rest.next() : buffered;
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

