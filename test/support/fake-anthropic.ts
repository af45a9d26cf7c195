/**
 * A scripted Anthropic Messages upstream (`POST /v1/messages`): the handler a
 * real HTTP server calls with the parsed body. It speaks Anthropic's wire
 * format (a `message` as JSON; named SSE events when `stream` is true),
 * refuses what Anthropic refuses (fake-anthropic-checks.ts), and chooses its
 * behaviour by the model name:
 *
 * `error-500`, `error-429`, `error-529` (overloaded), `error-400`, `hang`,
 * `slow-N` (a delay before anything), `reset`, `cut` (dies after two text
 * deltas), `malformed` (garbage), `error-event` (an overloaded `error` event
 * before any content), `error-after` (one after two text deltas), `tools` (a
 * text block, then a `tool_use` block calling the first tool, its input in
 * `input_json_delta` pieces), `tools-noargs` (a call without input), `cache`
 * (usage with cache tokens), `ping` (a ping between every two events),
 * `refusal` and `pause-turn` (those stop reasons).
 *
 * `handleAnthropic` is the handler a fake server routes `POST /v1/messages`
 * to; `startFakeAnthropic` is a server of its own with only that route.
 *
 * Usage: input tokens are the words of the prompt, output tokens the words of
 * the reply (cut to `max_tokens` words, or at the first stop sequence). When
 * the last turn is the assistant's, the reply continues it: with the rest of
 * the reply when the reply starts with that turn's text (an answer cut
 * elsewhere and continued here), else with the whole reply after a space, as a
 * model continuing a word would.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isObject, refusalOf } from './fake-anthropic-checks.js';

/** One request as received (the same shape as the OpenAI fake's records). */
export interface AnthropicRequestRecord {
  model: string;
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
}

/** The input a `…tools…` model passes, cut into the pieces it streams it in. */
export const ANTHROPIC_TOOL_INPUT_PIECES = ['{"city": ', '"Paris", ', '"unit": "C"}'];
/** The text a `…tools…` model says before calling. */
export const ANTHROPIC_TOOL_PREAMBLE = 'Let me check.';
export const ANTHROPIC_TOOL_ID = 'toolu_fake_1';
/** The cache counts a `…cache…` model reports besides its input tokens. */
export const ANTHROPIC_CACHE_USAGE = { cache_creation_input_tokens: 11, cache_read_input_tokens: 13 };

export async function handleAnthropic(
  req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>,
  wait: (ms: number) => Promise<void>, reply: string, requests: AnthropicRequestRecord[] = [],
): Promise<void> {
  const model = typeof body.model === 'string' ? body.model : '';
  requests.push({ model, body, headers: req.headers });
  const refusal = refusalOf(req.headers, body);
  if (refusal) return sendError(res, refusal.status, refusal.type, refusal.message);

  const slow = /slow-(\d+)/.exec(model);
  if (slow) await wait(Number(slow[1]));
  if (res.destroyed) return;
  if (model.includes('hang')) return;
  if (model.includes('reset')) return void req.socket.destroy();
  const status = /error-(400|429|500|529)/.exec(model);
  if (status) return sendError(res, Number(status[1]), ERROR_TYPES[status[1]!]!, `${model} failed`);

  const answer = answerFor(body, model, reply);
  if (body.stream !== true) return sendMessage(res, answer, model);
  await sendStream(res, answer, model);
}

export interface FakeAnthropic {
  /** The base URL, e.g. `http://127.0.0.1:PORT` (the adapter adds `/v1/messages`). */
  url: string;
  /** Every request received, in order. */
  requests: AnthropicRequestRecord[];
  /** The client port of each request, in order: one port for many requests is one kept-alive connection. */
  clientPorts: number[];
  reset(): void;
  /** Stops listening and drops every connection, hanging ones included. */
  close(): Promise<void>;
}

/** A server of its own answering `POST /v1/messages` with `handleAnthropic`, for tests that need only Anthropic. */
export async function startFakeAnthropic(reply: string): Promise<FakeAnthropic> {
  const requests: AnthropicRequestRecord[] = [];
  const clientPorts: number[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const wait = (ms: number) => new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      resolve();
    }, ms);
    timers.add(timer);
  });
  const server = createServer((req, res) => {
    clientPorts.push(req.socket.remotePort ?? 0);
    void readJson(req).then((body) => {
      if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/messages') return sendError(res, 404, 'not_found_error', 'Not found');
      if (body === null) return sendError(res, 400, 'invalid_request_error', 'The request body is not valid JSON');
      return handleAnthropic(req, res, body, wait, reply, requests);
    }).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    clientPorts,
    reset() {
      requests.length = 0;
      clientPorts.length = 0;
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

async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}

const ERROR_TYPES: Record<string, string> = {
  '400': 'invalid_request_error', '429': 'rate_limit_error', '500': 'api_error', '529': 'overloaded_error',
};

interface Answer {
  id: string;
  model: string;
  /** The reply's words, each with the whitespace before it. */
  pieces: string[];
  call: { name: string; pieces: string[] } | null;
  stopReason: string;
  stopSequence: string | null;
  usage: Record<string, number>;
}

function answerFor(body: Record<string, unknown>, model: string, reply: string): Answer {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  let text = continuationOf(reply, messages.at(-1));
  let stopReason = 'end_turn';
  let stopSequence: string | null = null;
  for (const stop of Array.isArray(body.stop_sequences) ? body.stop_sequences : []) {
    const at = typeof stop === 'string' ? text.indexOf(stop) : -1;
    if (at === -1) continue;
    text = text.slice(0, at);
    [stopReason, stopSequence] = ['stop_sequence', stop as string];
  }
  const all = text.match(/\s*\S+/g) ?? [];
  const max = typeof body.max_tokens === 'number' ? body.max_tokens : Infinity;
  const call = toolCallFor(body, model);
  const pieces = call ? [ANTHROPIC_TOOL_PREAMBLE] : all.slice(0, max);
  if (call) stopReason = 'tool_use';
  else if (pieces.length < all.length) stopReason = 'max_tokens';
  if (model.includes('refusal')) stopReason = 'refusal';
  if (model.includes('pause-turn')) stopReason = 'pause_turn';
  const cache = model.includes('cache') ? ANTHROPIC_CACHE_USAGE : { cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  const output = countWords(pieces.join('')) + (call ? countWords(call.pieces.join('')) : 0);
  return {
    id: `msg_fake${Date.now().toString(36)}`, model, pieces, call, stopReason, stopSequence,
    usage: { input_tokens: promptWords(body), ...cache, output_tokens: output },
  };
}

/**
 * What the reply says after a final assistant turn (a prefill): the rest of the
 * reply when it starts with that turn's text, as a model continuing its own
 * answer would; any other prefill, the whole reply after a space. No final
 * assistant turn: the whole reply.
 */
function continuationOf(reply: string, last: unknown): string {
  if (!isObject(last) || last.role !== 'assistant') return reply;
  const { content } = last;
  const blocks: unknown[] = Array.isArray(content) ? content : [{ type: 'text', text: content }];
  const prefix = blocks.map((b) => (isObject(b) && b.type === 'text' && typeof b.text === 'string' ? b.text : '')).join('');
  return prefix !== '' && reply.startsWith(prefix) ? reply.slice(prefix.length) : ` ${reply}`;
}

/** A model named `…tools…`, given tools, calls the first of them after a few words. */
function toolCallFor(body: Record<string, unknown>, model: string): Answer['call'] {
  const tools = body.tools;
  if (!model.includes('tools') || !Array.isArray(tools) || !isObject(tools[0]) || typeof tools[0].name !== 'string') return null;
  return { name: tools[0].name, pieces: model.includes('noargs') ? [] : ANTHROPIC_TOOL_INPUT_PIECES };
}

function sendMessage(res: ServerResponse, answer: Answer, model: string): void {
  // Whatever broke a stream fails a whole answer as an overloaded upstream.
  if (model.includes('error-event') || model.includes('error-after')) return sendError(res, 529, 'overloaded_error', 'Overloaded');
  if (model.includes('malformed')) return sendRaw(res, 200, '{"id": "msg_broken", "type": "message", "content": [');
  const content: Array<Record<string, unknown>> = [{ type: 'text', text: answer.pieces.join('') }];
  if (answer.call) {
    const input: unknown = answer.call.pieces.length > 0 ? JSON.parse(answer.call.pieces.join('')) : {};
    content.push({ type: 'tool_use', id: ANTHROPIC_TOOL_ID, name: answer.call.name, input });
  }
  const text = JSON.stringify({
    id: answer.id, type: 'message', role: 'assistant', model: answer.model, content,
    stop_reason: answer.stopReason, stop_sequence: answer.stopSequence, usage: answer.usage,
  });
  if (!model.includes('cut')) return sendRaw(res, 200, text);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.write(text.slice(0, Math.floor(text.length / 2)), () => res.socket?.destroy());
}

async function sendStream(res: ServerResponse, answer: Answer, model: string): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  const pings = model.includes('ping');
  const send = async (type: string, data: Record<string, unknown> = {}): Promise<void> => {
    await write(res, `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    if (pings && type !== 'ping') await write(res, 'event: ping\ndata: {"type": "ping"}\n\n');
  };
  const overloaded = () => write(res, 'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}\n\n');

  if (model.includes('malformed')) return void res.end('event: message_start\ndata: {not json\n\n');
  const { input_tokens: input, cache_creation_input_tokens: written, cache_read_input_tokens: read } = answer.usage;
  await send('message_start', {
    message: {
      id: answer.id, type: 'message', role: 'assistant', model: answer.model, content: [], stop_reason: null, stop_sequence: null,
      usage: { input_tokens: input, cache_creation_input_tokens: written, cache_read_input_tokens: read, output_tokens: 1 },
    },
  });
  if (model.includes('error-event')) return void (await overloaded(), res.end());
  await send('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
  if (!pings) await write(res, 'event: ping\ndata: {"type": "ping"}\n\n');
  for (const [index, piece] of answer.pieces.entries()) {
    if (index === 2 && model.includes('cut')) return void res.socket?.destroy();
    if (index === 2 && model.includes('error-after')) return void (await overloaded(), res.end());
    await send('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } });
  }
  await send('content_block_stop', { index: 0 });
  if (answer.call) {
    await send('content_block_start', { index: 1, content_block: { type: 'tool_use', id: ANTHROPIC_TOOL_ID, name: answer.call.name, input: {} } });
    // Anthropic opens every streamed input with an empty piece, even for a call without input.
    for (const piece of ['', ...answer.call.pieces]) {
      await send('content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: piece } });
    }
    await send('content_block_stop', { index: 1 });
  }
  await send('message_delta', {
    delta: { stop_reason: answer.stopReason, stop_sequence: answer.stopSequence }, usage: { output_tokens: answer.usage.output_tokens },
  });
  await send('message_stop');
  if (!res.destroyed) res.end();
}

function sendError(res: ServerResponse, status: number, type: string, message: string): void {
  sendRaw(res, status, JSON.stringify({ type: 'error', error: { type, message } }));
}

function sendRaw(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Resolves once the text is handed to the socket, so that a cut after it still delivers it. */
function write(res: ServerResponse, text: string): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => res.write(text, () => resolve()));
}

/** Words as the fake counts them: runs of non-whitespace. */
export function countWords(text: string): number {
  return text.split(/\s+/).filter((word) => word !== '').length;
}

/** Words of the system prompt and of every turn's text and tool results. */
function promptWords(body: Record<string, unknown>): number {
  let total = 0;
  const count = (content: unknown): void => {
    if (typeof content === 'string') total += countWords(content);
    else if (Array.isArray(content)) {
      for (const block of content) {
        if (!isObject(block)) continue;
        if (typeof block.text === 'string') total += countWords(block.text);
        else if (block.type === 'tool_result') count(block.content);
      }
    }
  };
  count(body.system);
  for (const turn of Array.isArray(body.messages) ? body.messages : []) if (isObject(turn)) count(turn.content);
  return total;
}
