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
import type { TokenUsage, ToolCall, UpstreamEvent, UpstreamRequest } from '../providers/types.js';
import { UpstreamError } from '../providers/types.js';
import type { Store } from '../store/types.js';
import type { Breaker } from './breaker.js';
import type { Catalog, CatalogEntry } from './catalog.js';
import { openStreamWithFailover, type OpenedStream } from './failover.js';
import { Lease } from './lease.js';
import type { Candidate, RoutePlan, Router } from './router.js';
import { secondsToUtcMidnight } from '../clock.js';
import type { ChatCompletion, ChatRequest, Svc, WireToolCall } from './chat-types.js';
import { Answer } from './answer.js';

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
  | Extract<UpstreamEvent, { type: 'tool_call' }>
  | { type: 'end'; completion: ChatCompletion }
  | { type: 'error'; error: GatewayError; completion: ChatCompletion };

/** Upstream prompt counts are believed up to this multiple of the gateway's estimate (plus the slack): tokenizers differ, not tenfold. */
const PROMPT_TRUST = 2;
const PROMPT_SLACK = 64;

/** How long a stream waits in silence before it sends `: ping`. */
const PING_INTERVAL_MS = 1000;

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
    const plan = this.deps.router.plan(entry, request.messages, needed);
    // svc-auto may find no class whose alias holds the prompt.
    const window = plan.auto ? this.deps.catalog.get(plan.auto.alias)!.contextWindow : entry.contextWindow;
    if (needed > window) throw contextExceeded(window, promptTokens, request.maxTokens);
    return { request, entry, plan, promptTokens };
  }

  /** Daily cap, then credits, decided by the database in one transaction. */
  async reserve(caller: Caller, checked: CheckedRequest): Promise<Admission> {
    const { store, clock, leaseMs } = this.deps;
    const reservationId = newId('res');
    const contextWindow = this.servingWindow(checked);
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

  /**
   * A JSON completion. The upstream is streamed and gathered here, so that the
   * first-byte timeout means the same in both modes (a non-streaming upstream
   * sends no byte until it has written the whole answer). Nothing reaches the
   * client before the end, so any failure costs nothing.
   */
  async complete(admission: Admission, signal: AbortSignal, arrivedAt: number): Promise<ChatCompletion> {
    try {
      const { candidate, result: upstream } = await openStreamWithFailover(
        admission.plan.candidates, this.upstreamRequest(admission), this.failoverOptions(signal));
      const answer = await gather(upstream).catch((err: unknown) => {
        throw err instanceof UpstreamError && err.failure !== 'aborted'
          ? errors.upstreamUnavailable(`The upstream failed mid-answer: ${err.message}.`, err)
          : err;
      });
      const tokens = this.meteredUsage(admission, answer.usage, answer.outputText);
      const svc = await this.settle(admission, candidate, tokens, arrivedAt);
      return this.completion(admission, answer, tokens, svc);
    } catch (err) {
      await this.releaseQuietly(admission);
      throw err;
    }
  }

  /**
   * A streamed completion. It always ends in one `end` or `error` output that
   * carries the settled completion, also when the client left (then nobody
   * reads it, but an Idempotency-Key keeps it).
   */
  async *stream(admission: Admission, signal: AbortSignal, arrivedAt: number): AsyncGenerator<StreamOutput> {
    const opening = openStreamWithFailover(admission.plan.candidates, this.upstreamRequest(admission), this.failoverOptions(signal));
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
    let failure: GatewayError | null = null;
    let settled: { tokens: TokenUsage; svc: Svc } | undefined;
    try {
      for (const pending = upstream.first.values(); ; ) {
        const step = await nextEvent(pending, upstream.rest);
        if (step.done) break;
        const out = answer.add(step.value);
        if (out?.type === 'delta' && out.content) yield out;
        else if (out?.type === 'tool_call') yield out;
      }
    } catch (err) {
      if (!(err instanceof UpstreamError)) throw err;
      failure = err.failure === 'aborted'
        ? errors.upstreamUnavailable('The client closed the stream.', err)
        : errors.upstreamUnavailable(`The upstream failed mid-stream: ${err.message}.`, err);
    } finally {
      upstream.cancel();
      // Every exit passes here, the client leaving too: charge what was delivered,
      // by the upstream's count only when it finished and reported one; nothing delivered costs nothing.
      if (!answer.delivered) {
        await this.releaseQuietly(admission);
      } else {
        const tokens = this.meteredUsage(admission, answer.finishReason !== null && !failure ? answer.usage : null, answer.outputText);
        settled = { tokens, svc: await this.settle(admission, candidate, tokens, arrivedAt) };
      }
    }
    if (!settled) throw failure ?? errors.upstreamUnavailable('The upstream ended the stream without content.');
    const completion = this.completion(admission, answer, settled.tokens, settled.svc);
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

  private upstreamRequest(admission: Admission): Omit<UpstreamRequest, 'model'> {
    const r = admission.request;
    return {
      messages: r.messages, maxTokens: admission.maxOutput, temperature: r.temperature, topP: r.topP,
      stop: r.stop, seed: r.seed, presencePenalty: r.presencePenalty, frequencyPenalty: r.frequencyPenalty,
      user: r.user, responseFormat: r.responseFormat, tools: r.tools, toolChoice: r.toolChoice, parallelToolCalls: r.parallelToolCalls,
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

/** Drains an opened stream into one answer; throws the upstream's failure. */
async function gather(upstream: OpenedStream): Promise<Answer> {
  const answer = new Answer();
  try {
    for (const pending = upstream.first.values(); ; ) {
      const step = await nextEvent(pending, upstream.rest);
      if (step.done) return answer;
      answer.add(step.value);
    }
  } finally {
    upstream.cancel();
  }
}

function contextExceeded(window: number, promptTokens: number, maxTokens: number | null): GatewayError {
  const prompt = promptTokens > window ? `more than ${window}` : String(promptTokens);
  return errors.contextLengthExceeded(`This model's context window is ${window} tokens; the messages take ${prompt}` +
    (maxTokens === null ? ' with no room left for output.' : ` and max_tokens asks for ${maxTokens} more.`));
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

