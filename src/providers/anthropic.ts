/**
 * The adapter for Anthropic's Messages API (`POST {base_url}/v1/messages`):
 * one configuration and one keep-alive pool per provider. Each translation
 * concern has its own file under `anthropic/`: the prompt
 * (convert-messages.ts), tools (tools.ts), the rest of the request and what
 * it cannot honour (request-body.ts), the whole answer (response.ts), the
 * stream (stream-events.ts), stop reasons, usage, errors and continuation.
 */
import type { Pool } from 'undici';
import {
  createPool, discard, joinUrl, keepAliveChunks, postJson, readBounded, releaseConnection, toUpstreamError,
  type PoolOptions, type ResponseBody,
} from './http.js';
import { decodeSse } from './sse.js';
import { UpstreamError, type AttemptContext, type ProviderAdapter, type UpstreamRequest } from './types.js';
import { LeadingWhitespace } from './anthropic/continuation.js';
import { convertMessages, type AnthropicPrompt } from './anthropic/convert-messages.js';
import { toMessagesBody, unsupportedField } from './anthropic/request-body.js';
import { parseMessage } from './anthropic/response.js';
import { readMessageEvents } from './anthropic/stream-events.js';

export const ANTHROPIC_BASE_URL = 'https://api.anthropic.com';
export const ANTHROPIC_VERSION = '2023-06-01';

export interface AnthropicAdapterOptions extends PoolOptions {
  id: string;
  /** Up to the host, e.g. `https://api.anthropic.com` (the default); `/v1/messages` is added. */
  baseUrl?: string;
  apiKey?: string;
  /** The `anthropic-version` header; `2023-06-01` when absent. */
  version?: string;
}

export type AnthropicAdapter = ProviderAdapter & { close(): Promise<void> };

export function createAnthropicAdapter(options: AnthropicAdapterOptions): AnthropicAdapter {
  const endpoint = messagesUrl(options.baseUrl ?? ANTHROPIC_BASE_URL);
  const pool = createPool(endpoint.origin, options);
  const upstream: Upstream = { id: options.id, endpoint, pool, headers: versionHeaders(options) };
  const { id } = options;

  return {
    id,

    unsupported: unsupportedField,

    // Anthropic continues a final assistant turn natively.
    continues: () => true,

    async complete(request, ctx) {
      const prompt = convertMessages(request.messages, request.prefix);
      const { body } = await post(upstream, request, prompt, ctx, false);
      ctx.onFirstByte();
      try {
        const completion = parseMessage(id, await readBounded(id, body));
        return { ...completion, content: new LeadingWhitespace(prompt.trimmedChars).take(completion.content) };
      } catch (error) {
        throw toUpstreamError(id, error, ctx.signal);
      } finally {
        discard(body);
      }
    },

    async *stream(request, ctx) {
      const prompt = convertMessages(request.messages, request.prefix);
      const { body, json } = await post(upstream, request, prompt, ctx, true);
      let finished = false;
      try {
        // Anthropic always streams when asked; a JSON answer here is not its format.
        if (json) throw new UpstreamError('malformed', `${id} answered a stream request with JSON`);
        yield* readMessageEvents(id, decodeSse(keepAliveChunks(body)), new LeadingWhitespace(prompt.trimmedChars));
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

/** `${baseUrl}/v1/messages`, whether or not the base ends with a slash; its query is kept. */
export function messagesUrl(baseUrl: string): URL {
  return joinUrl(baseUrl, '/v1/messages');
}

interface Upstream {
  id: string;
  endpoint: URL;
  pool: Pool;
  /** The key and version headers, the same on every request. */
  headers: Record<string, string>;
}

function versionHeaders(options: AnthropicAdapterOptions): Record<string, string> {
  const headers: Record<string, string> = { 'anthropic-version': options.version ?? ANTHROPIC_VERSION };
  if (options.apiKey !== undefined) headers['x-api-key'] = options.apiKey;
  return headers;
}

/** POSTs the request; resolves with the body once a 2xx response's headers are in, and whether it is JSON. */
function post(
  upstream: Upstream, request: UpstreamRequest, prompt: AnthropicPrompt, ctx: AttemptContext, stream: boolean,
): Promise<{ body: ResponseBody; json: boolean }> {
  return postJson({
    id: upstream.id, url: upstream.endpoint, pool: upstream.pool, signal: ctx.signal,
    headers: { accept: stream ? 'text/event-stream' : 'application/json', ...upstream.headers },
    body: () => toMessagesBody(request, prompt, stream),
  });
}
