/**
 * What every HTTP adapter shares: one keep-alive pool per upstream, a POST of
 * JSON that turns a non-2xx answer into a 'status' failure, bounded reading of
 * a JSON body, letting a finished stream's connection go back to the pool, and
 * mapping any failure below an adapter to the one `UpstreamError`.
 */
import { Pool, request as sendRequest, type Dispatcher } from 'undici';
import { SseLimitError } from './sse.js';
import { UpstreamError } from './types.js';

export type ResponseBody = Dispatcher.ResponseData['body'];

export interface PoolOptions {
  /** Most sockets open to this upstream at once; unlimited when absent. */
  connections?: number;
  /** How long to wait for the response headers (undici's default when absent: 300 s). */
  headersTimeoutMs?: number;
  /** Longest silence allowed between two pieces of the body (undici's default: 300 s). */
  bodyTimeoutMs?: number;
}

export function createPool(origin: string, options: PoolOptions): Pool {
  return new Pool(origin, {
    connections: options.connections ?? null,
    ...(options.headersTimeoutMs !== undefined && { headersTimeout: options.headersTimeoutMs }),
    ...(options.bodyTimeoutMs !== undefined && { bodyTimeout: options.bodyTimeoutMs }),
  });
}

/** The largest JSON answer read from an upstream; past it the answer is malformed. */
export const MAX_JSON_BODY_BYTES = 8 * 1024 * 1024;
/** After a stream's end, how long the rest of the body is read (and up to how many bytes in all) so that the connection can be reused. */
const DRAIN_LIMIT_BYTES = 64 * 1024 * 1024;
const DRAIN_TIMEOUT_MS = 1000;
const SNIPPET_CHARS = 300;

export interface JsonPost {
  /** The provider's id, for messages. */
  id: string;
  url: URL;
  pool: Pool;
  headers: Record<string, string>;
  /** Built lazily, so that a request the gateway cannot write fails as its own ('request'). */
  body: () => unknown;
  signal: AbortSignal;
}

/** POSTs JSON; resolves with the body once a 2xx response's headers are in, and whether it is JSON. */
export async function postJson(post: JsonPost): Promise<{ body: ResponseBody; json: boolean }> {
  const { id } = post;
  let text: string;
  try {
    text = JSON.stringify(post.body());
  } catch (error) {
    throw new UpstreamError('request', `${id}: the request could not be written as JSON`, { cause: error });
  }
  let response: Dispatcher.ResponseData;
  try {
    response = await sendRequest(post.url, {
      dispatcher: post.pool, method: 'POST', headers: { 'content-type': 'application/json', ...post.headers }, body: text, signal: post.signal,
    });
  } catch (error) {
    throw toUpstreamError(id, error, post.signal);
  }
  if (response.statusCode < 200 || response.statusCode > 299) {
    const snippet = await readSnippet(response.body);
    throw new UpstreamError('status', `${id} answered ${response.statusCode}: ${snippet}`, { status: response.statusCode });
  }
  return { body: response.body, json: isJsonResponse(response.headers['content-type']) };
}

/** The whole body as text, or a 'malformed' failure once it passes `limit` bytes. */
export async function readBounded(id: string, body: ResponseBody, limit = MAX_JSON_BODY_BYTES): Promise<string> {
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
 * The body as an async iterable that leaving early does not destroy: a stream
 * read up to its end marker lets its connection go back to the pool.
 */
export function keepAliveChunks(body: ResponseBody): AsyncIterable<Uint8Array> {
  return body.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
}

/**
 * Lets a finished stream's connection go back to the pool: what little may
 * follow its end is read in the background, briefly; an upstream that keeps
 * the body open past that loses the connection instead of holding the request.
 */
export function releaseConnection(body: ResponseBody): void {
  body.dump({ limit: DRAIN_LIMIT_BYTES, signal: AbortSignal.timeout(DRAIN_TIMEOUT_MS) }).catch(() => discard(body));
}

/**
 * Drops a body and its connection. Destroying an unfinished body makes undici
 * emit 'error' on it; nobody reads it any more, so that error is expected.
 */
export function discard(body: ResponseBody): void {
  body.on('error', () => undefined);
  body.destroy();
}

/** Any failure below an adapter, as the one typed error the gateway knows. */
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
    discard(body);
  }
  return snippetOf(text);
}

/** At most SNIPPET_CHARS of `text`, whitespace folded: for internal messages and logs only. */
export function snippetOf(text: string): string {
  const flat = text.slice(0, SNIPPET_CHARS * 4).replace(/\s+/g, ' ').trim();
  return flat.length > SNIPPET_CHARS ? `${flat.slice(0, SNIPPET_CHARS)}…` : flat;
}

function isJsonResponse(contentType: string | string[] | undefined): boolean {
  const value = Array.isArray(contentType) ? contentType[0] : contentType;
  return value !== undefined && value.toLowerCase().startsWith('application/json');
}

/** JSON.parse that answers undefined instead of throwing. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A token count: a non-negative safe integer. */
export function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** `${base}${suffix}` on the URL's path, whether or not the base ends with slashes; its query is kept. */
export function joinUrl(base: string, suffix: string): URL {
  const url = new URL(base);
  let end = url.pathname.length;
  while (end > 0 && url.pathname.charCodeAt(end - 1) === 0x2f) end--;
  url.pathname = `${url.pathname.slice(0, end)}${suffix}`;
  return url;
}
