/**
 * A scripted OpenAI-compatible upstream: a real HTTP server speaking the real
 * wire format, whose behaviour is chosen by the model name in the request
 * (`error-500`, `hang`, `slow-200`, `reset`, `malformed`, `cut`, `stall-300`, `inflated`, `tools`, `nostream`…).
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

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
}

export interface FakeUpstream {
  /** The base URL, e.g. `http://127.0.0.1:PORT/v1`. */
  url: string;
  /** Every chat-completions request received, in order. */
  requests: ReceivedRequest[];
  reset(): void;
  /** Stops listening and drops every connection, hanging ones included. */
  close(): Promise<void>;
}

/** Words as the fake upstream counts them: runs of non-whitespace. */
export function countWords(text: string): number {
  return text.split(/\s+/).filter((word) => word !== '').length;
}

const DEFAULT_REPLY = 'Hello from the fake upstream.';

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
  | { kind: 'stall'; ms: number };

function behaviourOf(model: string): Behaviour {
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
  if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/chat/completions') {
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

  const behaviour = behaviourOf(model);
  if (behaviour.kind === 'hang') return;
  if (behaviour.kind === 'reset') return void req.socket.destroy();
  if (behaviour.kind === 'error') return sendError(res, behaviour.status, errorType(behaviour.status), `${model} failed`);

  const answer = answerFor(body, model, script);
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
  const all = script.reply.match(/\s*\S+/g) ?? [];
  const max = typeof body.max_tokens === 'number' ? body.max_tokens : Infinity;
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
