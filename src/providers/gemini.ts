/**
 * The adapter for Google's Gemini API (`generativelanguage.googleapis.com`):
 * `models/{model}:generateContent` for a whole answer,
 * `:streamGenerateContent?alt=sse` for a stream. The key goes in the
 * `x-goog-api-key` header, never in the URL (where logs and proxies keep it).
 *
 * What it translates, each in its own file under `gemini/`: the conversation
 * (`convert-contents`), sampling, bounds and output format (`generation-config`),
 * tools (`prepare-tools`), the answer and its events (`parse-response`,
 * `read-answer`), finish reasons (`finish-reason`) and usage (`usage`).
 */
import type { Pool } from 'undici';
import {
  createPool, discard, joinUrl, keepAliveChunks, postJson, readBounded, releaseConnection, toUpstreamError,
  type PoolOptions, type ResponseBody,
} from './http.js';
import { toGeminiPrompt } from './gemini/convert-contents.js';
import { supportsResponseFormat, toGenerationConfig } from './gemini/generation-config.js';
import { toGeminiTools, unsupportedToolField } from './gemini/prepare-tools.js';
import { jsonAnswerEvents, readStreamEvents, toCompletion } from './gemini/read-answer.js';
import { UpstreamError, type AttemptContext, type ProviderAdapter, type UpstreamRequest } from './types.js';

export interface GeminiAdapterOptions extends PoolOptions {
  id: string;
  /** Up to the host, e.g. `https://generativelanguage.googleapis.com`; the adapter adds `/v1beta/models/…`. */
  baseUrl?: string;
  apiKey?: string;
}

export type GeminiAdapter = ProviderAdapter & { close(): Promise<void> };

export const GEMINI_BASE_URL = 'https://generativelanguage.googleapis.com';

export function createGeminiAdapter(options: GeminiAdapterOptions): GeminiAdapter {
  const baseUrl = options.baseUrl ?? GEMINI_BASE_URL;
  const pool = createPool(new URL(baseUrl).origin, options);
  const upstream: Upstream = { id: options.id, baseUrl, pool, apiKey: options.apiKey };
  const { id } = options;

  return {
    id,

    unsupported: (request) => {
      if (request.responseFormat !== undefined && !supportsResponseFormat(request.responseFormat)) return 'response_format';
      return unsupportedToolField(request);
    },

    // Gemini has no documented way to go on from a final model turn: an answer cut elsewhere is not continued here.
    continues: () => false,

    async complete(request, ctx) {
      const { body } = await post(upstream, request, ctx, false);
      ctx.onFirstByte();
      try {
        return toCompletion(jsonAnswerEvents(id, await readBounded(id, body)));
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
        // A server that answers JSON instead of events (a list of responses, or one): taken whole.
        yield* json ? jsonAnswerEvents(id, await readBounded(id, body)) : readStreamEvents(id, keepAliveChunks(body));
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
  baseUrl: string;
  pool: Pool;
  apiKey: string | undefined;
}

function post(upstream: Upstream, request: UpstreamRequest, ctx: AttemptContext, stream: boolean): Promise<{ body: ResponseBody; json: boolean }> {
  const headers: Record<string, string> = { accept: stream ? 'text/event-stream' : 'application/json' };
  if (upstream.apiKey !== undefined) headers['x-goog-api-key'] = upstream.apiKey;
  return postJson({
    id: upstream.id, url: geminiUrl(upstream.baseUrl, request.model, stream), pool: upstream.pool, signal: ctx.signal,
    headers, body: () => toGeminiBody(request),
  });
}

/**
 * `${baseUrl}/v1beta/models/{model}:generateContent`, or
 * `:streamGenerateContent?alt=sse`; the base's own query is kept. A model
 * written as `models/…` is taken as it is.
 */
export function geminiUrl(baseUrl: string, model: string, stream: boolean): URL {
  const name = model.startsWith('models/') ? model.slice('models/'.length) : model;
  const url = joinUrl(baseUrl, `/v1beta/models/${encodeURIComponent(name)}:${stream ? 'streamGenerateContent' : 'generateContent'}`);
  if (stream) url.searchParams.set('alt', 'sse');
  return url;
}

/** The request in Gemini's words. `user` has no counterpart and is not sent. */
export function toGeminiBody(request: UpstreamRequest): Record<string, unknown> {
  // The gateway asks for a continuation only where `continues` says yes, which is never here.
  if (request.prefix !== undefined) throw new UpstreamError('request', 'gemini: cannot continue a cut answer');
  return { ...toGeminiPrompt(request.messages), generationConfig: toGenerationConfig(request), ...toGeminiTools(request) };
}
