/**
 * A scripted OpenAI-compatible upstream: a real HTTP server speaking the real
 * wire format, whose behaviour is chosen by the model name in the request
 * (`error-500`, `hang`, `slow-200`, `reset`, `malformed`, `cut`, `stall-300`, `inflated`, `tools`, `nostream`…).
 *
 * Upstreams that break the gateway's bounds: `idle-after-first` (one word, then
 * only `: keep-alive` comments), `done-open` (`[DONE]` but the body never ends),
 * `drip` (a word every 100 ms, forever), `ignore-max` (IGNORED_MAX_REPLY, 3,000
 * words, whatever `max_tokens` says), `huge-line` (a first `data:` line of 2 MiB),
 * `huge-json` (a 9 MiB JSON completion, even when asked to stream), `leaky-500`
 * and `leaky-cut` (internal details in an error body, or in an error chunk mid-stream).
 *
 * The same server speaks Anthropic's Messages API on `/v1/messages`
 * (fake-anthropic.ts) and Gemini's on `/v1beta/models/…` (fake-gemini.ts), with
 * the same kind of behaviours chosen by model name.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { handleAnthropic } from './fake-anthropic.js';
import { handleGemini } from './fake-gemini.js';
import { continuedReply, outputBoundOf, reasoningRefusal } from './fake-openai-rules.js';

export interface FakeUpstreamOptions {
  /** What an ok model answers; cut to `max_tokens` words when that is smaller. */
  reply?: string;
  /** 'none': never report usage (as a model named `…no-usage…` does). */
  usage?: 'words' | 'none';
}

export interface ReceivedRequest {
  model: string;
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** Path and query as received (recorded for Gemini, whose model is in the path). */
  url?: string;
}

export interface FakeUpstream {
  /** `http://127.0.0.1:PORT`: the base URL of its Anthropic (`/v1/messages`) and Gemini (`/v1beta/models/…`) faces. */
  origin: string;
  /** The base URL, e.g. `http://127.0.0.1:PORT/v1`. */
  url: string;
  /** Every chat-completions request received, in order. */
  requests: ReceivedRequest[];
  reset(): void;
  /** Stops listening and drops every connection, hanging ones included. */
  close(): Promise<void>;
}

export type Vendor = 'openai' | 'anthropic' | 'gemini';

/** Which of the fake's three faces a request reached: Gemini's records its URL, Anthropic's carries its version header. */
export function vendorOf(request: ReceivedRequest): Vendor {
  if (request.url !== undefined) return 'gemini';
  return typeof request.headers['anthropic-version'] === 'string' ? 'anthropic' : 'openai';
}

/** Words as the fake upstream counts them: runs of non-whitespace. */
export function countWords(text: string): number {
  return text.split(/\s+/).filter((word) => word !== '').length;
}

const DEFAULT_REPLY = 'Hello from the fake upstream.';

/** What a model named `…ignore-max…` answers whatever `max_tokens` says: 3,000 words (and so its usage says). */
export const IGNORED_MAX_REPLY = Array.from({ length: 3000 }, (_, i) => ['alpha', 'bravo', 'charlie', 'delta', 'echo'][i % 5]).join(' ');
/** The error body a `…leaky-500…` model answers with, and the error chunk a `…leaky-cut…` model sends after two words. */
const LEAKY_500_BODY = '{"error":{"message":"internal detail: sk-upstream-SECRET at db-7.internal","type":"server_error"}}';
const LEAKY_CUT_CHUNK = '{"error":{"message":"upstream detail: db-7.internal exploded"}}';
/** How often the endless models (`idle-after-first`, `drip`) send their next comment or word. */
const TICK_MS = 100;

export async function startFakeUpstream(options: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
  const requests: ReceivedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const wait = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        resolve();
      }, ms);
      timers.add(timer);
    });
  const script: Script = { reply: options.reply ?? DEFAULT_REPLY, usage: options.usage ?? 'words', wait };

  const server = createServer((req, res) => {
    void handle(req, res, script, requests).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/v1`,
    origin: `http://127.0.0.1:${port}`,
    requests,
    reset() {
      requests.length = 0;
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

interface Script {
  reply: string;
  usage: 'words' | 'none';
  wait(ms: number): Promise<void>;
}

/** What the model name asks for; `slow-N` is a delay before any of them. */
type Behaviour =
  | { kind: 'ok' }
  | { kind: 'error'; status: 400 | 429 | 500 }
  | { kind: 'hang' | 'reset' | 'malformed' | 'cut' }
  | { kind: 'stall'; ms: number }
  | { kind: StreamFault }
  | { kind: 'huge-json' | 'leaky-500' };

/** Faults of a stream: a model with one of these streams whatever was asked. */
type StreamFault = 'idle-after-first' | 'done-open' | 'drip' | 'huge-line' | 'leaky-cut';
const STREAM_FAULTS: readonly StreamFault[] = ['idle-after-first', 'done-open', 'drip', 'huge-line', 'leaky-cut'];

function behaviourOf(model: string): Behaviour {
  // Before `cut`, which `leaky-cut` contains.
  for (const kind of STREAM_FAULTS) if (model.includes(kind)) return { kind };
  if (model.includes('huge-json')) return { kind: 'huge-json' };
  if (model.includes('leaky-500')) return { kind: 'leaky-500' };
  if (model.includes('error-500')) return { kind: 'error', status: 500 };
  if (model.includes('error-429')) return { kind: 'error', status: 429 };
  if (model.includes('error-400')) return { kind: 'error', status: 400 };
  if (model.includes('hang')) return { kind: 'hang' };
  if (model.includes('reset')) return { kind: 'reset' };
  if (model.includes('malformed')) return { kind: 'malformed' };
  if (model.includes('cut')) return { kind: 'cut' };
  const stall = /stall-(\d+)/.exec(model);
  if (stall) return { kind: 'stall', ms: Number(stall[1]) };
  return { kind: 'ok' };
}

async function handle(req: IncomingMessage, res: ServerResponse, script: Script, requests: ReceivedRequest[]) {
  const text = await readBody(req);
  const path = req.url?.split('?')[0] ?? '';
  // The same server speaks Anthropic's and Gemini's wire formats on their paths.
  if (req.method === 'POST' && path === '/v1/messages') return handleAnthropic(req, res, parseObject(text) ?? {}, script.wait, script.reply, requests);
  if (req.method === 'POST' && path.startsWith('/v1beta/models/')) return handleGemini(req, res, parseObject(text) ?? {}, script.wait, script.reply, requests);
  if (req.method !== 'POST' || path !== '/v1/chat/completions') {
    return sendError(res, 404, 'not_found', `no route for ${req.method} ${req.url}`);
  }
  const body = parseObject(text);
  if (!body || typeof body.model !== 'string') {
    return sendError(res, 400, 'invalid_request_error', 'body must be a JSON object with a model');
  }
  const model = body.model;
  requests.push({ model, body, headers: req.headers });

  const slow = /slow-(\d+)/.exec(model);
  if (slow) await script.wait(Number(slow[1]));
  if (res.destroyed) return;

  const refused = reasoningRefusal(model, body);
  if (refused) return sendError(res, 400, 'invalid_request_error', refused);
  const behaviour = behaviourOf(model);
  if (behaviour.kind === 'hang') return;
  if (behaviour.kind === 'reset') return void req.socket.destroy();
  if (behaviour.kind === 'error') return sendError(res, behaviour.status, errorType(behaviour.status), `${model} failed`);
  if (behaviour.kind === 'leaky-500') return sendJsonText(res, 500, LEAKY_500_BODY);

  const answer = answerFor(body, model, script);
  if (behaviour.kind === 'huge-json') return sendJsonText(res, 200, hugeCompletion(answer));
  if (isStreamFault(behaviour.kind)) return sendFaultyStream(res, answer, behaviour.kind, script);
  const call = toolCallFor(body, model);
  // A model named `…nostream…` answers JSON whatever was asked, as servers that cannot stream do.
  const streams = body.stream === true && !model.includes('nostream');
  if (call) return streams ? sendToolCallStream(res, answer, call) : sendToolCallJson(res, answer, call);
  if (streams) await sendStream(res, answer, behaviour, script);
  else await sendJson(res, answer, behaviour, script);
}

/** The arguments a `…tools…` model passes, cut into the pieces it streams them in. */
export const TOOL_ARGUMENT_PIECES = ['{"city": ', '"Paris", ', '"unit": "C"}'];

interface FakeToolCall { id: string; name: string }

/** A model named `…tools…`, given tools, calls the first of them instead of answering. */
function toolCallFor(body: Record<string, unknown>, model: string): FakeToolCall | null {
  const tools = body.tools;
  if (!model.includes('tools') || !Array.isArray(tools) || !isObject(tools[0]) || !isObject(tools[0].function)) return null;
  const name = tools[0].function.name;
  return typeof name === 'string' ? { id: 'call_fake_1', name } : null;
}

function toolCallUsage(answer: Answer) {
  const completion = countWords(TOOL_ARGUMENT_PIECES.join(''));
  const prompt = answer.usage?.prompt_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

function sendToolCallJson(res: ServerResponse, answer: Answer, call: FakeToolCall): void {
  const text = JSON.stringify({
    id: answer.id, object: 'chat.completion', created: answer.created, model: answer.model,
    choices: [{
      index: 0,
      message: { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: { name: call.name, arguments: TOOL_ARGUMENT_PIECES.join('') } }] },
      finish_reason: 'tool_calls',
    }],
    usage: toolCallUsage(answer),
  });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function sendToolCallStream(res: ServerResponse, answer: Answer, call: FakeToolCall): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const send = (delta: Record<string, unknown>, finishReason: string | null = null, extra: Record<string, unknown> = {}) =>
    write(res, `data: ${JSON.stringify({
      id: answer.id, object: 'chat.completion.chunk', created: answer.created, model: answer.model,
      choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra,
    })}\n\n`);
  await send({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }] });
  for (const piece of TOOL_ARGUMENT_PIECES) await send({ tool_calls: [{ index: 0, function: { arguments: piece } }] });
  await send({}, 'tool_calls');
  if (answer.streamUsage) await write(res, `data: ${JSON.stringify({ id: answer.id, object: 'chat.completion.chunk', created: answer.created, model: answer.model, choices: [], usage: toolCallUsage(answer) })}\n\n`);
  res.end('data: [DONE]\n\n');
}

interface Answer {
  id: string;
  created: number;
  model: string;
  /** The reply's words, each with the whitespace before it; joined they are the content. */
  pieces: string[];
  finishReason: 'stop' | 'length';
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  streamUsage: boolean;
}

function answerFor(body: Record<string, unknown>, model: string, script: Script): Answer {
  // A model named `…ignore-max…` answers its long reply whole, whatever max_tokens says.
  const ignoresMax = model.includes('ignore-max');
  const all = (ignoresMax ? IGNORED_MAX_REPLY : continuedReply(script.reply, body)).match(/\s*\S+/g) ?? [];
  const max = ignoresMax ? Infinity : outputBoundOf(body);
  const pieces = all.slice(0, Math.max(0, max));
  const reportsUsage = script.usage !== 'none' && !model.includes('no-usage');
  // A model named `…inflated…` reports absurd usage, as a broken upstream might.
  const inflate = model.includes('inflated') ? 1_000_000 : 0;
  const promptTokens = promptWords(body.messages) + inflate;
  const completionTokens = countWords(pieces.join('')) + inflate;
  const streamOptions = body.stream_options;
  return {
    id: `chatcmpl-fake${Date.now().toString(36)}`,
    created: Math.floor(Date.now() / 1000),
    model,
    pieces,
    finishReason: pieces.length < all.length ? 'length' : 'stop',
    usage: reportsUsage
      ? { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens }
      : null,
    streamUsage: isObject(streamOptions) && streamOptions.include_usage === true,
  };
}

async function sendJson(res: ServerResponse, answer: Answer, behaviour: Behaviour, script: Script) {
  if (behaviour.kind === 'malformed') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return void res.end('{"id": "chatcmpl-broken", "choices": [');
  }
  const text = JSON.stringify({
    id: answer.id,
    object: 'chat.completion',
    created: answer.created,
    model: answer.model,
    choices: [
      { index: 0, message: { role: 'assistant', content: answer.pieces.join('') }, finish_reason: answer.finishReason },
    ],
    ...(answer.usage && { usage: answer.usage }),
  });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  if (behaviour.kind === 'cut') {
    await write(res, text.slice(0, Math.floor(text.length / 2)));
    return void res.socket?.destroy();
  }
  if (behaviour.kind === 'stall') {
    res.flushHeaders();
    await script.wait(behaviour.ms);
  }
  if (!res.destroyed) res.end(text);
}

async function sendStream(res: ServerResponse, answer: Answer, behaviour: Behaviour, script: Script) {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  /** Resolves once the chunk is handed to the socket, so a `cut` after it still delivers it. */
  const send = (value: unknown) => write(res, `data: ${JSON.stringify(value)}\n\n`);
  const chunk = (delta: Record<string, string>, finishReason: string | null = null) => ({
    id: answer.id,
    object: 'chat.completion.chunk',
    created: answer.created,
    model: answer.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
    ...(answer.streamUsage && { usage: null }),
  });

  if (behaviour.kind === 'malformed') return void res.end('data: {not json\n\n');
  await send(chunk({ role: 'assistant', content: '' }));
  for (const [index, piece] of answer.pieces.entries()) {
    if (behaviour.kind === 'cut' && index === 2) return void res.socket?.destroy();
    if (behaviour.kind === 'stall' && index === 1) await script.wait(behaviour.ms);
    await send(chunk({ content: piece }));
  }
  if (behaviour.kind === 'cut') return void res.socket?.destroy();
  await send(chunk({}, answer.finishReason));
  if (answer.streamUsage && answer.usage) await send({ ...chunk({}), choices: [], usage: answer.usage });
  if (!res.destroyed) res.end('data: [DONE]\n\n');
}

function isStreamFault(kind: string): kind is StreamFault {
  return (STREAM_FAULTS as readonly string[]).includes(kind);
}

/** The stream faults; the endless ones go on until the client leaves or the fake closes. */
async function sendFaultyStream(res: ServerResponse, answer: Answer, fault: StreamFault, script: Script): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
  let left = false;
  res.once('close', () => { left = true; });
  const send = (value: unknown) => write(res, `data: ${JSON.stringify(value)}\n\n`);
  const chunk = (delta: Record<string, string>, finishReason: string | null = null) => ({
    id: answer.id, object: 'chat.completion.chunk', created: answer.created, model: answer.model,
    choices: [{ index: 0, delta, finish_reason: finishReason }],
  });
  const pieces = answer.pieces.length > 0 ? answer.pieces : ['word'];

  if (fault === 'huge-line') {
    // One content chunk whose line is 2 MiB long, then an otherwise proper end.
    await send(chunk({ role: 'assistant', content: ' huge'.repeat(Math.ceil((2 * 1024 * 1024) / 5)) }));
    await send(chunk({}, 'stop'));
    return void (left || res.end('data: [DONE]\n\n'));
  }
  await send(chunk({ role: 'assistant', content: '' }));
  switch (fault) {
    case 'idle-after-first':
      await send(chunk({ content: pieces[0]! }));
      while (!left) {
        await script.wait(TICK_MS);
        await write(res, ': keep-alive\n\n');
      }
      return;
    case 'drip':
      for (let i = 0; !left; i++) {
        await send(chunk({ content: pieces[i % pieces.length]! }));
        await script.wait(TICK_MS);
      }
      return;
    case 'leaky-cut':
      for (const piece of pieces.slice(0, 2)) await send(chunk({ content: piece }));
      await write(res, `data: ${LEAKY_CUT_CHUNK}\n\n`);
      return void res.end();
    case 'done-open':
      // The whole answer and `[DONE]`, but the body never ends: the socket stays until the client leaves.
      for (const piece of pieces) await send(chunk({ content: piece }));
      await send(chunk({}, answer.finishReason));
      if (answer.streamUsage && answer.usage) await send({ ...chunk({}), choices: [], usage: answer.usage });
      return void (await write(res, 'data: [DONE]\n\n'));
  }
}

/** A proper completion of over 9 MiB, for `…huge-json…`. */
function hugeCompletion(answer: Answer): string {
  const content = ' huge'.repeat(Math.ceil((9 * 1024 * 1024) / 5));
  const words = countWords(content);
  const prompt = answer.usage?.prompt_tokens ?? 0;
  return JSON.stringify({
    id: answer.id, object: 'chat.completion', created: answer.created, model: answer.model,
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    usage: { prompt_tokens: prompt, completion_tokens: words, total_tokens: prompt + words },
  });
}

function sendJsonText(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function write(res: ServerResponse, text: string): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => res.write(text, () => resolve()));
}

function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  const body = JSON.stringify({ error: { message, type, param: null, code: type } });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function errorType(status: number): string {
  if (status === 429) return 'rate_limit_exceeded';
  if (status === 400) return 'invalid_request_error';
  return 'server_error';
}

/** Words across every message's content (a string, or an array of text parts). */
function promptWords(messages: unknown): number {
  if (!Array.isArray(messages)) return 0;
  let total = 0;
  for (const message of messages) {
    if (!isObject(message)) continue;
    const { content } = message;
    if (typeof content === 'string') total += countWords(content);
    else if (Array.isArray(content)) {
      for (const part of content) if (isObject(part) && typeof part.text === 'string') total += countWords(part.text);
    }
  }
  return total;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
