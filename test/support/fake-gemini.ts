/**
 * A scripted Gemini upstream, speaking the Gemini API's wire format:
 * `POST /v1beta/models/{model}:generateContent` answers one JSON response,
 * `:streamGenerateContent?alt=sse` a stream of them as `data:` events (CRLF, as
 * Google sends them; without `alt=sse`, one JSON list). Every chunk repeats
 * the usage so far, cumulatively, as Gemini does.
 *
 * It checks what Gemini checks (see `fake-gemini-validate.ts`), and more: the
 * key must come in `x-goog-api-key` (403 without it) and never in the URL
 * (`?key=` is a 400 here, so tests prove the adapter never puts it there).
 *
 * The behaviour is chosen by the model name: `error-500`, `error-429`,
 * `error-400`, `hang`, `slow-N` (a delay first), `stall-N` (a pause after the
 * first chunk), `reset`, `cut` (dies after 2 chunks), `malformed`, `tools`
 * (a functionCall, then STOP in a later chunk of its own), `safety` (finish
 * SAFETY), `malformed-call` (finish MALFORMED_FUNCTION_CALL), `blocked`
 * (promptFeedback.blockReason, no candidates), `thoughts` (a thought part and
 * thoughtsTokenCount), `cache` (cachedContentTokenCount); else `ok`.
 * Usage: promptTokenCount = words of the prompt's texts, candidatesTokenCount =
 * words of the reply, cut to maxOutputTokens words.
 *
 * `handleGemini` answers one request on any server; `startFakeGemini` is a
 * server of its own that sends every request to it.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { invalidBody, isObject } from './fake-gemini-validate.js';

export interface ReceivedGeminiRequest {
  model: string;
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** Path and query as received. */
  url?: string;
}

/** Where requests go when the caller passes no list of its own. */
export const receivedGeminiRequests: ReceivedGeminiRequest[] = [];

/** The arguments a `…tools…` model passes to the first declared function. */
export const FAKE_TOOL_ARGS = { city: 'Paris', unit: 'C' };
/** The thoughtsTokenCount of a `…thoughts…` model, and the text of its thought part (never part of the answer). */
export const FAKE_THOUGHT_TOKENS = 7;
export const FAKE_THOUGHT_TEXT = 'Let me think about the weather.';
/** A `…cache…` model reports min(prompt words, this) as cachedContentTokenCount. */
export const FAKE_CACHED_TOKENS = 3;

type Behaviour =
  | 'ok' | 'error-500' | 'error-429' | 'error-400' | 'hang' | 'reset' | 'cut' | 'malformed-call' | 'malformed'
  | 'tools' | 'safety' | 'blocked' | 'thoughts' | 'cache';
// `malformed-call` before `malformed`, which it contains.
const BEHAVIOURS: readonly Behaviour[] = [
  'error-500', 'error-429', 'error-400', 'hang', 'reset', 'cut', 'malformed-call', 'malformed', 'tools', 'safety', 'blocked', 'thoughts', 'cache',
];
const ROUTE = /^\/v1beta\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;
const STATUS_NAMES: Record<number, string> = { 400: 'INVALID_ARGUMENT', 403: 'PERMISSION_DENIED', 404: 'NOT_FOUND', 429: 'RESOURCE_EXHAUSTED', 500: 'INTERNAL' };

export async function handleGemini(
  req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>, wait: (ms: number) => Promise<void>, reply: string,
  requests: ReceivedGeminiRequest[] = receivedGeminiRequests,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://fake-gemini');
  const route = ROUTE.exec(url.pathname);
  if (req.method !== 'POST' || !route) return sendError(res, 404, `no route for ${req.method} ${url.pathname}`);
  const model = decodeURIComponent(route[1]!);
  requests.push({ model, body, headers: req.headers, url: req.url });
  if (url.searchParams.has('key')) return sendError(res, 400, 'the API key belongs in the x-goog-api-key header, not in the URL');
  if (typeof req.headers['x-goog-api-key'] !== 'string') return sendError(res, 403, 'Method doesn\'t allow unregistered callers');
  const invalid = invalidBody(body);
  if (invalid !== null) return sendError(res, 400, invalid);

  const slow = /slow-(\d+)/.exec(model);
  if (slow) await wait(Number(slow[1]));
  if (res.destroyed) return;
  const behaviour = BEHAVIOURS.find((kind) => model.includes(kind)) ?? 'ok';
  if (behaviour === 'hang') return;
  if (behaviour === 'reset') return void req.socket.destroy();
  if (behaviour.startsWith('error-')) return sendError(res, Number(behaviour.slice(6)), `${model} failed`);

  const chunks = answerChunks(body, model, behaviour, reply);
  const stall = /stall-(\d+)/.exec(model);
  const script: Script = { behaviour, wait, stallMs: stall ? Number(stall[1]) : 0 };
  if (route[2] === 'generateContent') return sendJson(res, merge(chunks), script);
  if (url.searchParams.get('alt') !== 'sse') return sendJson(res, chunks, script);
  return sendStream(res, chunks, script);
}

export interface FakeGemini {
  /** The base URL, e.g. `http://127.0.0.1:PORT` (the adapter adds `/v1beta/models/…`). */
  url: string;
  /** Every request received, in order. */
  requests: ReceivedGeminiRequest[];
  /** How many TCP connections it accepted. */
  connections(): number;
  /** Stops listening and drops every connection, hanging ones included. */
  close(): Promise<void>;
}

export async function startFakeGemini(reply = 'Hello from the fake Gemini.'): Promise<FakeGemini> {
  const requests: ReceivedGeminiRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let connections = 0;
  const wait = (ms: number) => new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      resolve();
    }, ms);
    timers.add(timer);
  });
  const server = createServer((req, res) => {
    void readObject(req).then((body) => handleGemini(req, res, body, wait, reply, requests)).catch(() => res.destroy());
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    connections: () => connections,
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

/** The body as a JSON object; anything else as an empty one, which the checks then refuse. */
async function readObject(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return isObject(value) ? value : {};
  } catch {
    return {};
  }
}

interface Script {
  behaviour: Behaviour;
  wait(ms: number): Promise<void>;
  stallMs: number;
}

type Part = Record<string, unknown>;
interface Step { parts: Part[]; finishReason?: string; words: number }

/** The answer as the chunks a stream of it carries, each with its usage so far. */
function answerChunks(body: Record<string, unknown>, model: string, behaviour: Behaviour, reply: string): Record<string, unknown>[] {
  const prompt = promptWords(body);
  const config = isObject(body.generationConfig) ? body.generationConfig : {};
  const max = typeof config.maxOutputTokens === 'number' ? config.maxOutputTokens : Infinity;
  const meta = { modelVersion: model, responseId: `fake-${Date.now().toString(36)}` };
  if (behaviour === 'blocked') {
    return [{ promptFeedback: { blockReason: 'SAFETY', safetyRatings: [] }, usageMetadata: { promptTokenCount: prompt, totalTokenCount: prompt }, ...meta }];
  }
  let total = 0;
  return stepsFor(body, behaviour, reply, max).map((step) => {
    total += step.words;
    const candidate = {
      ...(step.parts.length > 0 && { content: { parts: step.parts, role: 'model' } }),
      ...(step.finishReason && { finishReason: step.finishReason }),
      index: 0,
    };
    return { candidates: [candidate], usageMetadata: usage(prompt, total, behaviour), ...meta };
  });
}

function stepsFor(body: Record<string, unknown>, behaviour: Behaviour, reply: string, max: number): Step[] {
  if (behaviour === 'malformed-call') return [{ parts: [], finishReason: 'MALFORMED_FUNCTION_CALL', words: 0 }];
  const call = behaviour === 'tools' ? callFor(body) : null;
  // The functionCall comes alone; STOP follows in a chunk of its own, with an empty text, as Gemini streams it.
  if (call) return [{ parts: [call], words: countWords(JSON.stringify(FAKE_TOOL_ARGS)) }, { parts: [{ text: '' }], finishReason: 'STOP', words: 0 }];
  const all = reply.match(/\s*\S+/g) ?? [];
  const pieces = all.slice(0, Math.max(0, max));
  const steps: Step[] = pieces.map((text) => ({ parts: [{ text }], words: 1 }));
  if (behaviour === 'thoughts') steps.unshift({ parts: [{ text: FAKE_THOUGHT_TEXT, thought: true }], words: 0 });
  if (behaviour === 'safety') return [...steps.slice(0, 1), { parts: [], finishReason: 'SAFETY', words: 0 }];
  const last = steps.at(-1) ?? { parts: [], words: 0 };
  last.finishReason = pieces.length < all.length ? 'MAX_TOKENS' : 'STOP';
  if (steps.length === 0) steps.push(last);
  return steps;
}

/** A `…tools…` model calls the first declared function, unless the last turn answers a call. */
function callFor(body: Record<string, unknown>): Part | null {
  const contents = Array.isArray(body.contents) ? body.contents : [];
  const last: unknown = contents.at(-1);
  const lastParts: unknown[] = isObject(last) && Array.isArray(last.parts) ? last.parts : [];
  if (lastParts.some((part) => isObject(part) && part.functionResponse !== undefined)) return null;
  const tool = Array.isArray(body.tools) ? body.tools[0] : undefined;
  const fn = isObject(tool) && Array.isArray(tool.functionDeclarations) ? tool.functionDeclarations[0] : undefined;
  if (!isObject(fn) || typeof fn.name !== 'string') return null;
  return { functionCall: { name: fn.name, args: FAKE_TOOL_ARGS }, thoughtSignature: 'ZmFrZS1zaWduYXR1cmU=' };
}

function usage(prompt: number, candidates: number, behaviour: Behaviour): Record<string, unknown> {
  const thoughts = behaviour === 'thoughts' ? FAKE_THOUGHT_TOKENS : 0;
  const cached = behaviour === 'cache' ? Math.min(prompt, FAKE_CACHED_TOKENS) : 0;
  return {
    promptTokenCount: prompt,
    candidatesTokenCount: candidates,
    totalTokenCount: prompt + candidates + thoughts,
    ...(thoughts > 0 && { thoughtsTokenCount: thoughts }),
    ...(cached > 0 && { cachedContentTokenCount: cached, cacheTokensDetails: [{ modality: 'TEXT', tokenCount: cached }] }),
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: prompt }],
  };
}

/** The chunks of a stream as the one response `generateContent` gives: parts joined, the last finish and usage. */
function merge(chunks: Record<string, unknown>[]): Record<string, unknown> {
  const last = chunks.at(-1)!;
  if (!Array.isArray(last.candidates)) return last;
  const parts = chunks.flatMap((chunk) => {
    const candidate = Array.isArray(chunk.candidates) && isObject(chunk.candidates[0]) ? chunk.candidates[0] : {};
    return isObject(candidate.content) && Array.isArray(candidate.content.parts) ? candidate.content.parts : [];
  }).filter((part) => !(isObject(part) && part.text === ''));
  const candidate = isObject(last.candidates[0]) ? last.candidates[0] : {};
  const { content: _content, ...rest } = candidate;
  return { ...last, candidates: [{ ...(parts.length > 0 && { content: { parts, role: 'model' } }), ...rest }] };
}

async function sendJson(res: ServerResponse, value: unknown, script: Script): Promise<void> {
  const text = script.behaviour === 'malformed' ? '{"candidates": [' : JSON.stringify(value);
  res.writeHead(200, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(text) });
  if (script.behaviour === 'cut') {
    await write(res, text.slice(0, Math.floor(text.length / 2)));
    return void res.socket?.destroy();
  }
  if (script.stallMs > 0) {
    res.flushHeaders();
    await script.wait(script.stallMs);
  }
  if (!res.destroyed) res.end(text);
}

async function sendStream(res: ServerResponse, chunks: Record<string, unknown>[], script: Script): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  if (script.behaviour === 'malformed') return void res.end('data: {not json\r\n\r\n');
  for (const [index, chunk] of chunks.entries()) {
    if (script.behaviour === 'cut' && index === 2) return void res.socket?.destroy();
    if (index === 1 && script.stallMs > 0) await script.wait(script.stallMs);
    await write(res, `data: ${JSON.stringify(chunk)}\r\n\r\n`);
  }
  if (script.behaviour === 'cut') return void res.socket?.destroy();
  if (!res.destroyed) res.end();
}

function write(res: ServerResponse, text: string): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => res.write(text, () => resolve()));
}

function sendError(res: ServerResponse, code: number, message: string): void {
  const body = JSON.stringify({ error: { code, message, status: STATUS_NAMES[code] ?? 'UNKNOWN' } });
  res.writeHead(code, { 'content-type': 'application/json; charset=UTF-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function countWords(text: string): number {
  return text.split(/\s+/).filter((word) => word !== '').length;
}

/** Words of every text in the system instruction and the contents. */
function promptWords(body: Record<string, unknown>): number {
  const contents = Array.isArray(body.contents) ? body.contents : [];
  const turns = isObject(body.systemInstruction) ? [body.systemInstruction, ...contents] : contents;
  let total = 0;
  for (const turn of turns) {
    const parts = isObject(turn) && Array.isArray(turn.parts) ? turn.parts : [];
    for (const part of parts) if (isObject(part) && typeof part.text === 'string') total += countWords(part.text);
  }
  return total;
}
