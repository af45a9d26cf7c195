/**
 * The adapter for every OpenAI-compatible upstream (OpenAI, vLLM, Together,
 * Groq, a local llama.cpp…): one configuration each, one keep-alive pool each.
 */
import type { Pool } from 'undici';
import {
  createPool, discard, isCount, isRecord, joinUrl, keepAliveChunks, parseJson, postJson, readBounded, releaseConnection,
  snippetOf, toUpstreamError, type PoolOptions, type ResponseBody,
} from './http.js';
import { decodeSse } from './sse.js';
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

export interface OpenAiAdapterOptions extends PoolOptions {
  id: string;
  /** Up to the version, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  apiKey?: string;
}

export type OpenAiAdapter = ProviderAdapter & { close(): Promise<void> };

export function createOpenAiAdapter(options: OpenAiAdapterOptions): OpenAiAdapter {
  const endpoint = chatCompletionsUrl(options.baseUrl);
  const pool = createPool(endpoint.origin, options);
  const upstream: Upstream = { id: options.id, endpoint, pool, apiKey: options.apiKey };
  const { id } = options;

  return {
    id,

    // An OpenAI-compatible server takes every field the gateway accepts; what its model refuses, its route says.
    unsupported: () => null,

    continues: (params) => params.continue,

    async complete(request, ctx) {
      const { body } = await post(upstream, request, ctx, false);
      ctx.onFirstByte();
      try {
        return parseCompletion(id, await readBounded(id, body));
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
        yield* json ? completionEvents(parseCompletion(id, await readBounded(id, body))) : readChunkEvents(id, body);
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
function post(upstream: Upstream, request: UpstreamRequest, ctx: AttemptContext, stream: boolean): Promise<{ body: ResponseBody; json: boolean }> {
  return postJson({
    id: upstream.id, url: upstream.endpoint, pool: upstream.pool, signal: ctx.signal,
    headers: requestHeaders(upstream.apiKey, stream), body: () => toWireBody(request, stream),
  });
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
  return joinUrl(baseUrl, '/chat/completions');
}

function requestHeaders(apiKey: string | undefined, stream: boolean): Record<string, string> {
  const headers: Record<string, string> = { accept: stream ? 'text/event-stream' : 'application/json' };
  if (apiKey !== undefined) headers.authorization = `Bearer ${apiKey}`;
  return headers;
}

/** The request in OpenAI's words; optional fields only when set. */
export function toWireBody(request: UpstreamRequest, stream: boolean): Record<string, unknown> {
  const refuses = new Set(request.params.refuses);
  const messages = request.messages.map(toWireMessage);
  const body: Record<string, unknown> = { model: request.model, messages, [request.params.maxTokensField]: request.maxTokens };
  // The gateway's defaults go only to models that take them; a caller's own value never reaches a route that refuses it.
  if (!refuses.has('temperature')) body.temperature = request.temperature;
  if (!refuses.has('top_p')) body.top_p = request.topP;
  body.stream = stream;
  if (request.prefix !== undefined) {
    // Continue the cut answer: it is the final assistant turn, and the server goes on from it (vLLM, SGLang, llama.cpp).
    messages.push({ role: 'assistant', content: request.prefix });
    body.continue_final_message = true;
    body.add_generation_prompt = false;
  }
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
  for await (const event of decodeSse(keepAliveChunks(body))) {
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

/** OpenAI's usage; its details (cached prompt tokens, reasoning tokens) are already inside the two counts. */
function toUsage(usage: unknown): TokenUsage | null {
  if (!isRecord(usage)) return null;
  const { prompt_tokens: promptTokens, completion_tokens: completionTokens } = usage;
  if (!isCount(promptTokens) || !isCount(completionTokens)) return null;
  const cached = isRecord(usage.prompt_tokens_details) ? usage.prompt_tokens_details.cached_tokens : undefined;
  const reasoning = isRecord(usage.completion_tokens_details) ? usage.completion_tokens_details.reasoning_tokens : undefined;
  return {
    promptTokens, completionTokens,
    ...(isCount(cached) && { cachedTokens: cached }),
    ...(isCount(reasoning) && { reasoningTokens: reasoning }),
  };
}
