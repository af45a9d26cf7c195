/**
 * What every provider adapter speaks. Adapters turn one upstream's wire format
 * into these typed values; nothing above this layer sees HTTP or SSE text.
 */
export type Role = 'system' | 'user' | 'assistant' | 'tool';

/** A function call the model asked for; `arguments` is JSON text, as the model wrote it. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface ChatMessage {
  role: Role;
  content: string;
  name?: string;
  toolCallId?: string;
  /** An assistant turn's calls, sent back with the tool results that answer them. */
  toolCalls?: ToolCall[];
}

export type FinishReason = 'stop' | 'length' | 'content_filter' | 'tool_calls';

/**
 * How one route's model takes parameters: from the route's config, else the
 * built-in defaults for its model family (OpenAI's reasoning models want
 * `max_completion_tokens` and refuse sampling parameters).
 */
export interface RouteParams {
  /** The wire field that carries the output bound. */
  maxTokensField: 'max_tokens' | 'max_completion_tokens';
  /**
   * Request fields (wire names: `temperature`, `top_p`, `presence_penalty`…) the
   * model refuses: the gateway's own defaults for them are not sent, and a value
   * the caller set makes the route skipped for that request.
   */
  refuses: readonly string[];
  /** Whether an answer cut on another route may be continued here (OpenAI-compatible servers: opt-in). */
  continue: boolean;
}

export const DEFAULT_ROUTE_PARAMS: RouteParams = { maxTokensField: 'max_tokens', refuses: [], continue: false };

/** One call to one upstream model, after the gateway applied its defaults and clamp. */
export interface UpstreamRequest {
  model: string;
  /** How this route's model takes parameters. */
  params: RouteParams;
  messages: ChatMessage[];
  maxTokens: number;
  temperature: number;
  topP: number;
  /** Sampling fields the caller set (the others carry the gateway's defaults, which a route may leave out). */
  callerSet: { temperature: boolean; topP: boolean };
  /**
   * An answer cut on another route, to be continued: sent as the final
   * assistant turn, and the upstream's output is what follows it.
   */
  prefix?: string;
  stop?: string[];
  seed?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  user?: string;
  responseFormat?: Record<string, unknown>;
  /** Function definitions and the choice among them, in OpenAI's shape, passed through. */
  tools?: Array<Record<string, unknown>>;
  toolChoice?: string | Record<string, unknown>;
  parallelToolCalls?: boolean;
}

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  /** Of the prompt tokens, those read from the provider's prompt cache (inside promptTokens). */
  cachedTokens?: number;
  /** Of the completion tokens, those spent on reasoning (inside completionTokens, never added to it). */
  reasoningTokens?: number;
}

export interface UpstreamCompletion {
  content: string;
  toolCalls?: ToolCall[];
  finishReason: FinishReason;
  /** As the upstream reported it; null when it reported none. */
  usage: TokenUsage | null;
}

export type UpstreamEvent =
  | { type: 'delta'; content: string }
  /** A piece of the `index`th tool call: its id and name come first, its arguments in fragments. */
  | { type: 'tool_call'; index: number; id?: string; name?: string; arguments: string }
  | { type: 'finish'; finishReason: FinishReason }
  | { type: 'usage'; usage: TokenUsage };

export interface AttemptContext {
  /** Aborted when the gateway gives up on this attempt or the client leaves. */
  signal: AbortSignal;
  /** Called by `complete` when the upstream's response starts (its headers arrived). */
  onFirstByte(): void;
}

export interface ProviderAdapter {
  /** The provider's id from the config, e.g. `openai`. */
  readonly id: string;
  /**
   * The first field of `request` (its wire name in OpenAI's request, e.g.
   * `response_format`, `seed`) this provider cannot honour, or null. A route
   * that cannot honour a field is skipped for that request, never served without it.
   */
  unsupported(request: UpstreamRequest): string | null;
  /** Whether this route can continue an answer from a `prefix`. */
  continues(params: RouteParams): boolean;
  complete(request: UpstreamRequest, ctx: AttemptContext): Promise<UpstreamCompletion>;
  /** Yields events as they arrive; throws `UpstreamError` on any failure. */
  stream(request: UpstreamRequest, ctx: AttemptContext): AsyncIterable<UpstreamEvent>;
}

/**
 * How an attempt failed. `request`: the gateway could not build its own request
 * for this route (a value the provider's format cannot carry); that says nothing
 * of the upstream's health and never counts against its breaker.
 */
export type UpstreamFailure = 'connection' | 'status' | 'malformed' | 'timeout' | 'aborted' | 'request';

/** A provider failed. `retryable` says whether another route may still serve. */
export class UpstreamError extends Error {
  readonly failure: UpstreamFailure;
  readonly status: number | null;
  readonly retryable: boolean;

  constructor(failure: UpstreamFailure, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'UpstreamError';
    this.failure = failure;
    this.status = options.status ?? null;
    // Any upstream failure may be that upstream's own (a 400 for a parameter it
    // does not take, a 401 for its key): the next route is always worth a try.
    this.retryable = failure !== 'aborted';
  }
}
