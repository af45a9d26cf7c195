/**
 * Helpers for the end-to-end tests: raw HTTP calls for what the openai SDK
 * has no method for, the OpenAI error shape, SSE parsing, typed response
 * bodies, and a look into the gateway's database.
 */
import assert from 'node:assert/strict';
import type { TestGateway } from './gateway.js';
import type { Svc } from '../../src/gateway/chat-types.js';

export interface HttpResult {
  status: number;
  headers: Headers;
  text: string;
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

export interface CallOptions {
  key?: string | null;
  /** Sent as JSON unless it is a string or a Buffer (then sent as is). */
  body?: unknown;
  headers?: Record<string, string>;
}

/** One HTTP call to the gateway; `path` starts with `/` and is relative to its origin. */
export async function call(gw: Pick<TestGateway, 'origin'>, method: string, path: string, options: CallOptions = {}): Promise<HttpResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  let body: string | Blob | undefined;
  if (typeof options.body === 'string') body = options.body;
  else if (options.body instanceof Uint8Array) body = new Blob([new Uint8Array(options.body)]);
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
    headers['content-type'] = 'application/json';
  }
  const response = await fetch(`${gw.origin}${path}`, { method, headers, body });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

export interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

/** Asserts the OpenAI error body exactly: its four fields, a non-empty message, the status. */
export function assertError(
  res: HttpResult, status: number, type: string, code: string, param: string | null = null,
): ErrorBody['error'] {
  assert.equal(res.status, status, `expected ${status}, got ${res.status}: ${res.text.slice(0, 300)}`);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.match(res.headers.get('x-request-id') ?? '', /^[\w.:-]{1,128}$/, 'every response carries x-request-id');
  const body = res.json as ErrorBody;
  assert.deepEqual(Object.keys(body), ['error']);
  assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.doesNotMatch(body.error.message, /\n\s+at /, 'no stack trace');
  assert.deepEqual({ type: body.error.type, code: body.error.code, param: body.error.param }, { type, code, param });
  return body.error;
}

/** The gateway's own type for `svc`: the tests read what the source declares. */
export type { Svc } from '../../src/gateway/chat-types.js';

/** The gateway's `svc` field on any completion or chunk; fails the test when it is missing. */
export function svcOf(value: object): Svc {
  const svc = (value as { svc?: Svc }).svc;
  assert.ok(svc, `no svc field on ${JSON.stringify(value)}`);
  return svc;
}

export interface CreditsBody {
  account_id: string;
  total_credits: number;
  earned_credits: { balance: number; expires_at: string | null; days_remaining: number };
  purchased_credits: { balance: number; expires_at: null };
  currency: string;
  reserved_credits: number;
  available_credits: number;
}

export async function credits(gw: Pick<TestGateway, 'origin'>, key: string): Promise<CreditsBody> {
  const res = await call(gw, 'GET', '/v1/credits', { key });
  assert.equal(res.status, 200, res.text);
  return res.json as CreditsBody;
}

export interface UsageBody {
  period_start: string;
  period_end: string;
  total_requests: number;
  total_prompt_tokens: number;
  total_completion_tokens: number;
  total_credits_spent: number;
  breakdown_by_model: Record<string, { requests: number; credits: number }>;
  daily: Array<{ date: string; model: string; requests: number; prompt_tokens: number; completion_tokens: number; credits: number }>;
}

export async function usage(gw: Pick<TestGateway, 'origin'>, key: string, query = ''): Promise<UsageBody> {
  const res = await call(gw, 'GET', `/v1/usage${query}`, { key });
  assert.equal(res.status, 200, res.text);
  return res.json as UsageBody;
}

/** The `data:` payloads of an SSE text, in order, and the comment lines seen. */
export function parseSse(text: string): { data: string[]; comments: string[] } {
  const data: string[] = [];
  const comments: string[] = [];
  for (const block of text.split('\n\n')) {
    if (block === '') continue;
    const lines = block.split('\n');
    const payload = lines.filter((l) => l.startsWith('data: ')).map((l) => l.slice('data: '.length));
    comments.push(...lines.filter((l) => l.startsWith(':')));
    if (payload.length > 0) data.push(payload.join('\n'));
  }
  return { data, comments };
}

/** A config with one alias per entry of `aliases`, each routed to the fake upstream's models in order. */
export function aliasesConfig(
  upstreamUrl: string,
  aliases: Record<string, string[]>,
  routing: Record<string, unknown> = {},
  pricing = { input_credits_per_1k: 4, output_credits_per_1k: 12 },
): unknown {
  return {
    providers: [{ id: 'fake', type: 'openai', base_url: upstreamUrl, api_key_env: 'FAKE_UPSTREAM_KEY' }],
    models: Object.entries(aliases).map(([id, models]) => ({
      id, name: id, description: id, context_window: 64_000, pricing,
      routes: models.map((model) => ({ provider: 'fake', model })),
    })),
    routing: { first_byte_timeout_ms: 2000, ...routing },
  };
}

/** Runs a query on the gateway's database from a second connection (`?` placeholders on both backends). */
export function queryDb<T>(gw: Pick<TestGateway, 'rows'>, sql: string, ...params: unknown[]): Promise<T[]> {
  return gw.rows<T>(sql, ...params);
}

/** A `fetch` that counts the calls it passes on, for the SDK's `fetch` option. */
export function countingFetch(): { fetch: typeof fetch; calls: () => number } {
  let count = 0;
  return {
    fetch: (input, init) => {
      count += 1;
      return fetch(input, init);
    },
    calls: () => count,
  };
}
