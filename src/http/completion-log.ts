/**
 * One record per chat completion that reached its handler (authenticated):
 * the `svc_completions_total` count and exactly one info log line,
 * `msg: "completion"`, whatever the ending (JSON or stream, success or failure).
 *
 * The line holds ids, the alias, the serving upstream, status, credits, tokens
 * and timings; never a key, and the prompt only when `logging.prompts` is on.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { GatewayError } from '../errors.js';
import type { ChatCompletion } from '../gateway/chat-types.js';
import type { Admission, CheckedRequest } from '../gateway/completion.js';
import type { Metrics } from '../metrics.js';
import type { ChatMessage } from '../providers/types.js';
import { toGatewayError } from './errors.js';

export interface CompletionLogOptions {
  metrics: Metrics;
  /** Adds the request's messages to the line (off by default: prompts are the caller's data). */
  logPrompts: boolean;
}

export class CompletionRecord {
  private checked: CheckedRequest | null = null;
  private admission: Admission | null = null;
  private completion: ChatCompletion | null = null;
  private error: GatewayError | null = null;
  private stream = false;
  private replayed = false;
  /** When the request arrived, on performance.now()'s clock. */
  private readonly arrivedAt: number;

  constructor(private readonly request: FastifyRequest, private readonly reply: FastifyReply, private readonly options: CompletionLogOptions) {
    this.arrivedAt = performance.now() - reply.elapsedTime;
  }

  passedChecks(checked: CheckedRequest): void {
    this.checked = checked;
    this.stream = checked.request.stream;
  }

  admitted(admission: Admission): void {
    this.admission = admission;
  }

  /** The answer: a completion (an idempotent replay too), and for a stream cut midway its error. */
  answered(completion: ChatCompletion | null, error: GatewayError | null = null, replayed = false): void {
    this.completion = completion;
    this.error = error;
    this.replayed = replayed;
  }

  failed(err: unknown): void {
    this.error = toGatewayError(err);
  }

  /** Counts and logs the completion; called once, on every exit of the handler. */
  finish(): void {
    const { metrics, logPrompts } = this.options;
    const alias = this.checked?.entry.id ?? null;
    const trace = this.admission?.trace;
    const upstream = trace?.upstream ?? null;
    const status = this.status();
    metrics.completions.inc({ alias: alias ?? 'unknown', status: String(status), route: upstream ?? 'none', mode: this.stream ? 'stream' : 'json' });
    const usage = this.completion?.usage;
    const caller = this.request.caller;
    const ttft = trace?.firstContentAt == null ? null : Math.max(0, Math.round(trace.firstContentAt - this.arrivedAt));
    this.request.log.info({
      request_id: this.request.id,
      account_id: caller?.accountId ?? null,
      key_id: caller?.keyId ?? null,
      alias,
      auto_alias: this.checked?.plan.auto?.alias ?? null,
      upstream,
      stream: this.stream,
      status,
      error_code: this.error?.code ?? null,
      replayed: this.replayed,
      credits_charged: trace?.charged?.credits ?? 0,
      prompt_tokens: trace?.charged?.promptTokens ?? usage?.prompt_tokens ?? 0,
      completion_tokens: trace?.charged?.completionTokens ?? usage?.completion_tokens ?? 0,
      latency_ms: Math.round(this.reply.elapsedTime),
      ttft_ms: ttft,
      ...(logPrompts && this.checked && { prompt: promptOf(this.checked.request.messages) }),
    }, 'completion');
  }

  /** The HTTP status the caller got: a stream that broke off after its headers is still a 200. */
  private status(): number {
    if (this.reply.raw.headersSent) return this.reply.raw.statusCode;
    return this.error?.status ?? 200;
  }
}

function promptOf(messages: ChatMessage[]): Array<{ role: string; content: string }> {
  return messages.map((m) => ({ role: m.role, content: m.content }));
}
