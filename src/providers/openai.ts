/**
 * The adapter for every OpenAI-compatible upstream (OpenAI, vLLM, Together,
 * Groq, a local llama.cpp…): one configuration each, one keep-alive pool each.
 */
import { Pool, request as sendRequest, type Dispatcher } from 'undici';
import { decodeSse, SseLimitError } from './sse.js';
import {
  UpstreamError,
  type AttemptContext,
  type ChatMessage,
  type FinishReason,
  type ProviderAdapter,
  type TokenUsage,
  type ToolCall,
  type UpstreamCompletion,
  type UpstreamEvent,
  type UpstreamRequest,
} from './types.js';

export interface OpenAiAdapterOptions {
  id: string;
  /** Up to the version, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  apiKey?: string;
  /** Most sockets open to this upstream at once; unlimited when absent. */
  connections?: number;
  /** How long to wait for the response headers (undici's default when absent: 300 s). */
  headersTimeoutMs?: number;
  /** Longest silence allowed between two pieces of the body (undici's default: 300 s). */
  bodyTimeoutMs?: number;
}

export type OpenAiAdapter = ProviderAdapter & { close(): Promise<void> };

type ResponseBody = Dispatcher.ResponseData['body'];

const SNIPPET_CHARS = 300;
/** The largest JSON answer read from an upstream; past it the answer is malformed. */
export const MAX_JSON_BODY_BYTES = 8 * 1024 * 1024;
/** After `[DONE]`, how long the rest of the body is read (and up to how many bytes in all) so that the connection can be reused. */
const DRAIN_LIMIT_BYTES = 64 * 1024 * 1024;
const DRAIN_TIMEOUT_MS = 1000;

export function createOpenAiAdapter(options: OpenAiAdapterOptions): OpenAiAdapter {
  const endpoint = chatCompletionsUrl(options.baseUrl);
  const pool = new Pool(endpoint.origin, {
    connections: options.connections ?? null,
    ...(options.headersTimeoutMs !== undefined && { headersTimeout: options.headersTimeoutMs }),
    ...(options.bodyTimeoutMs !== undefined && { bodyTimeout: options.bodyTimeoutMs }),
  });
  const upstream: Upstream = { id: options.id, endpoint, pool, apiKey: options.apiKey };
  const { id } = options;

  return {
    id,

    async complete(request, ctx) {
      const { body } = await post(upstream, request, ctx, false);
      ctx.onFirstByte();
      try {
        return parseCompletion(id, await readBounded(id, body, MAX_JSON_BODY_BYTES));
      } catch (error) {
        throw toUpstreamError(id, error, ctx.signal);
      } finally {
        discard(body);
      }
    },

    async *stream(request, ctx) {
      const { body, json } = await post(upstream, request, ctx, true);
      let finished = false;
      try {
        // A server that cannot stream may answer the whole completion as JSON: take it as one piece.
        yield* json ? completionEvents(parseCompletion(id, await readBounded(id, body, MAX_JSON_BODY_BYTES))) : readChunkEvents(id, body);
        finished = true;
      } catch (error) {
        throw toUpstreamError(id, error, ctx.signal);
      } finally {
        if (finished) releaseConnection(body);
        else discard(body);
      }
    },

    async close() {
      await pool.close();
    },
  };
}

interface Upstream {
  id: string;
  endpoint: URL;
  pool: Pool;
  apiKey: string | undefined;
}

/** POSTs the request; resolves with the body once a 2xx response's headers are in, and whether it is JSON. */
async function post(
  upstream: Upstream, request: UpstreamRequest, ctx: AttemptContext, stream: boolean,
): Promise<{ body: ResponseBody; json: boolean }> {
  const { id } = upstream;
  const body = buildBody(id, request, stream);
  let response: Dispatcher.ResponseData;
  try {
    response = await sendRequest(upstream.endpoint, {
      dispatcher: upstream.pool,
      method: 'POST',
      headers: requestHeaders(upstream.apiKey, stream),
      body,
      signal: ctx.signal,
    });
  } catch (error) {
    throw toUpstreamError(id, error, ctx.signal);
  }
  if (response.statusCode < 200 || response.statusCode > 299) {
    const snippet = await readSnippet(response.body);
    throw new UpstreamError('status', `${id} answered ${response.statusCode}: ${snippet}`, {
      status: response.statusCode,
    });
  }
  return { body: response.body, json: isJsonResponse(response.headers['content-type']) };
}

/** The request as JSON text; a request the gateway cannot write is its own failure, not the upstream's. */
function buildBody(id: string, request: UpstreamRequest, stream: boolean): string {
  try {
    return JSON.stringify(toWireBody(request, stream));
  } catch (error) {
    throw new UpstreamError('request', `${id}: the request could not be written as JSON`, { cause: error });
  }
}

/** A whole completion as the events a stream of it would have carried. */
function* completionEvents(completion: UpstreamCompletion): Generator<UpstreamEvent> {
  if (completion.content !== '') yield { type: 'delta', content: completion.content };
  for (const [index, call] of (completion.toolCalls ?? []).entries()) {
    yield { type: 'tool_call', index, id: call.id, name: call.name, arguments: call.arguments };
  }
  yield { type: 'finish', finishReason: completion.finishReason };
  if (completion.usage) yield { type: 'usage', usage: completion.usage };
}

/** `${baseUrl}/chat/completions`, whether or not the base ends with a slash; its query is kept. */
export function chatCompletionsUrl(baseUrl: string): URL {
  const url = new URL(baseUrl);
  let end = url.pathname.length;
  while (end > 0 && url.pathname.charCodeAt(end - 1) === 0x2f) end--;
  url.pathname = `${url.pathname.slice(0, end)}/chat/completions`;
  return url;
}

function requestHeaders(apiKey: string | undefined, stream: boolean): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: stream ? 'text/event-stream' : 'application/json',
  };
  if (apiKey !== undefined) headers.authorization = `Bearer ${apiKey}`;
  return headers;
}

/** The request in OpenAI's words; optional fields only when set. */
export function toWireBody(request: UpstreamRequest, stream: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: request.model,
    messages: request.messages.map(toWireMessage),
    max_tokens: request.maxTokens,
    temperature: request.temperature,
    top_p: request.topP,
    stream,
  };
  if (stream) body.stream_options = { include_usage: true };
  if (request.stop !== undefined) body.stop = request.stop;
  if (request.seed !== undefined) body.seed = request.seed;
  if (request.presencePenalty !== undefined) body.presence_penalty = request.presencePenalty;
  if (request.frequencyPenalty !== undefined) body.frequency_penalty = request.frequencyPenalty;
  if (request.user !== undefined) body.user = request.user;
  if (request.responseFormat !== undefined) body.response_format = request.responseFormat;
  if (request.tools !== undefined) body.tools = request.tools;
  if (request.toolChoice !== undefined) body.tool_choice = request.toolChoice;
  if (request.parallelToolCalls !== undefined) body.parallel_tool_calls = request.parallelToolCalls;
  return body;
}

function toWireMessage(message: ChatMessage): Record<string, unknown> {
  const calls = message.toolCalls ?? [];
  // An assistant turn that only called tools has null content, as OpenAI writes it.
  const wire: Record<string, unknown> = { role: message.role, content: message.content === '' && calls.length > 0 ? null : message.content };
  if (message.name !== undefined) wire.name = message.name;
  if (message.toolCallId !== undefined) wire.tool_call_id = message.toolCallId;
  if (calls.length > 0) {
    wire.tool_calls = calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  }
  return wire;
}

/** A `chat.completion` body as typed values, or a 'malformed' failure. */
export function parseCompletion(id: string, text: string): UpstreamCompletion {
  const body = parseJson(text);
  const choice = isRecord(body) && Array.isArray(body.choices) ? body.choices[0] : undefined;
  const message = isRecord(choice) ? choice.message : undefined;
  const content = isRecord(message) ? message.content : undefined;
  if (!isRecord(body) || !isRecord(choice) || (typeof content !== 'string' && content !== null)) {
    throw new UpstreamError('malformed', `${id} sent no choices[0].message.content: ${snippetOf(text)}`);
  }
  if (typeof choice.finish_reason !== 'string') {
    throw new UpstreamError('malformed', `${id} sent no choices[0].finish_reason: ${snippetOf(text)}`);
  }
  const toolCalls = isRecord(message) ? toToolCalls(message.tool_calls) : [];
  return {
    content: content ?? '',
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason: toFinishReason(choice.finish_reason),
    usage: toUsage(body.usage),
  };
}

/**
 * The typed events of an OpenAI chunk stream. The usage (its last report, if
 * any) comes once, after the finish. `[DONE]` ends the answer even if the
 * upstream keeps the body open.
 */
async function* readChunkEvents(id: string, body: ResponseBody): AsyncGenerator<UpstreamEvent> {
  let finished = false;
  let done = false;
  let usage: TokenUsage | null = null;
  // Leaving the loop at `[DONE]` must not destroy the body: the caller lets its connection go back to the pool.
  for await (const event of decodeSse(body.iterator({ destroyOnReturn: false }))) {
    if (event.data === '[DONE]') {
      done = true;
      break;
    }
    if (event.event === 'error') throw new UpstreamError('malformed', `${id} sent an error event: ${snippetOf(event.data)}`);
    const chunk = parseChunk(id, event.data);
    if (chunk.content !== '') yield { type: 'delta', content: chunk.content };
    for (const call of chunk.toolCalls) yield { type: 'tool_call', ...call };
    if (chunk.finishReason !== null && !finished) {
      finished = true;
      yield { type: 'finish', finishReason: chunk.finishReason };
    }
    usage = chunk.usage ?? usage;
  }
  if (!done && !finished) throw new UpstreamError('connection', `${id}: stream ended early`);
  if (usage) yield { type: 'usage', usage };
}

interface ParsedChunk {
  content: string;
  toolCalls: Array<{ index: number; id?: string; name?: string; arguments: string }>;
  finishReason: FinishReason | null;
  usage: TokenUsage | null;
}

/** One `chat.completion.chunk`; 'malformed' when it is not JSON or reports an error. */
export function parseChunk(id: string, data: string): ParsedChunk {
  const chunk = parseJson(data);
  if (!isRecord(chunk)) throw new UpstreamError('malformed', `${id} sent a chunk that is not JSON: ${snippetOf(data)}`);
  if (chunk.error !== undefined && chunk.error !== null) {
    throw new UpstreamError('malformed', `${id} sent an error chunk: ${snippetOf(data)}`);
  }
  if (chunk.choices !== undefined && chunk.choices !== null && !Array.isArray(chunk.choices)) {
    throw new UpstreamError('malformed', `${id} sent a chunk whose choices is no array: ${snippetOf(data)}`);
  }
  const choice: unknown = Array.isArray(chunk.choices) ? chunk.choices[0] : undefined;
  const delta = isRecord(choice) ? choice.delta : undefined;
  const content = isRecord(delta) && typeof delta.content === 'string' ? delta.content : '';
  const reason = isRecord(choice) ? choice.finish_reason : undefined;
  return {
    content,
    toolCalls: isRecord(delta) && Array.isArray(delta.tool_calls) ? delta.tool_calls.flatMap(toToolCallPiece) : [],
    finishReason: typeof reason === 'string' ? toFinishReason(reason) : null,
    usage: toUsage(chunk.usage),
  };
}

/** One `delta.tool_calls[]` entry: `index` always; `id` and `function.name` on the first piece. */
function toToolCallPiece(piece: unknown): ParsedChunk['toolCalls'] {
  if (!isRecord(piece) || !isCount(piece.index)) return [];
  const fn = isRecord(piece.function) ? piece.function : {};
  return [{
    index: piece.index,
    ...(typeof piece.id === 'string' && { id: piece.id }),
    ...(typeof fn.name === 'string' && { name: fn.name }),
    arguments: typeof fn.arguments === 'string' ? fn.arguments : '',
  }];
}

function toToolCalls(calls: unknown): ToolCall[] {
  if (!Array.isArray(calls)) return [];
  return calls.flatMap((call): ToolCall[] => {
    const fn = isRecord(call) && isRecord(call.function) ? call.function : null;
    if (!isRecord(call) || !fn || typeof call.id !== 'string' || typeof fn.name !== 'string') return [];
    return [{ id: call.id, name: fn.name, arguments: typeof fn.arguments === 'string' ? fn.arguments : '' }];
  });
}

export function toFinishReason(reason: string): FinishReason {
  switch (reason) {
    case 'length':
    case 'content_filter':
    case 'tool_calls':
      return reason;
    case 'function_call':
      return 'tool_calls';
    default:
      return 'stop';
  }
}

function toUsage(usage: unknown): TokenUsage | null {
  if (!isRecord(usage)) return null;
  const { prompt_tokens: promptTokens, completion_tokens: completionTokens } = usage;
  if (!isCount(promptTokens) || !isCount(completionTokens)) return null;
  return { promptTokens, completionTokens };
}

/** Any failure below this adapter, as the one typed error the gateway knows. */
export function toUpstreamError(id: string, error: unknown, signal: AbortSignal): UpstreamError {
  if (error instanceof UpstreamError) return error;
  if (signal.aborted) return new UpstreamError('aborted', `${id}: attempt aborted`, { cause: error });
  if (error instanceof SseLimitError) return new UpstreamError('malformed', `${id}: ${error.message}`, { cause: error });
  const code = errorCode(error);
  const detail = error instanceof Error ? error.message : String(error);
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new UpstreamError('timeout', `${id} timed out: ${detail}`, { cause: error });
  }
  return new UpstreamError('connection', `${id} connection failed: ${code ?? detail}`, { cause: error });
}

function errorCode(error: unknown): string | undefined {
  return isRecord(error) && typeof error.code === 'string' ? error.code : undefined;
}

/** The whole body as text, or a 'malformed' failure once it passes `limit` bytes. */
async function readBounded(id: string, body: ResponseBody, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new UpstreamError('malformed', `${id} sent a JSON answer over ${limit} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Lets a finished stream's connection go back to the pool: what little may
 * follow `[DONE]` is read in the background, briefly; an upstream that keeps
 * the body open past that loses the connection instead of holding the request.
 */
function releaseConnection(body: ResponseBody): void {
  body.dump({ limit: DRAIN_LIMIT_BYTES, signal: AbortSignal.timeout(DRAIN_TIMEOUT_MS) }).catch(() => discard(body));
}

/**
 * Drops a body and its connection. Destroying an unfinished body makes undici
 * emit 'error' on it; nobody reads it any more, so that error is expected.
 */
function discard(body: ResponseBody): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** The start of an error body, for the internal message; the rest is dropped. */
async function readSnippet(body: ResponseBody): Promise<string> {
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of body as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      if (text.length >= SNIPPET_CHARS) break;
    }
  } catch {
    // The status already says what went wrong; a broken error body adds nothing.
  } finally {
    body.destroy();
  }
  return snippetOf(text);
}

function snippetOf(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > SNIPPET_CHARS ? `${flat.slice(0, SNIPPET_CHARS)}…` : flat;
}

function isJsonResponse(contentType: string | string[] | undefined): boolean {
  const value = Array.isArray(contentType) ? contentType[0] : contentType;
  return value !== undefined && value.toLowerCase().startsWith('application/json');
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
