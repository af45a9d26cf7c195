/**
 * An OpenAI-compatible upstream that answers with generated garbage: a real
 * node:http server whose next answers follow the scenario the test sets
 * (random bytes, SSE frames broken or of the wrong types, wrong usage figures,
 * JSON where SSE was asked and the reverse, any HTTP status, enormous bodies,
 * streams that never end). It counts what it wrote and knows whether the
 * gateway has let each answer go.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';

export type Ending = 'close' | 'cut' | 'hang';

export type BodyPlan =
  | { kind: 'bytes'; bytes: Uint8Array; end: Ending }
  | { kind: 'sse'; frames: string[]; end: Ending }
  | { kind: 'json'; text: string; end: Ending }
  | { kind: 'enormous'; unit: string; bytes: number }
  | { kind: 'endless'; unit: string }
  /** Nearly right: SSE when asked to stream, else JSON; its usage figures may be wrong, its end cut. */
  | { kind: 'plausible'; words: string[]; finish: string; usage: string | null; done: boolean; cutAfter: number | null };

export interface Scenario {
  /** Before the status line: past first_byte_timeout_ms some of the time. */
  delayMs: number;
  status: number;
  /** null: no Content-Type; 'auto': SSE's when the request asked to stream, else JSON's. */
  contentType: string | null;
  body: BodyPlan;
}

export interface GarbageUpstream {
  url: string;
  scenario: Scenario;
  /** Bytes written for the answers so far. */
  written: number;
  /** Answers whose connection is still open (the gateway has not let them go). */
  open: number;
  close(): Promise<void>;
}

export async function startGarbageUpstream(): Promise<GarbageUpstream> {
  const sockets = new Set<import('node:net').Socket>();
  const state: GarbageUpstream = {
    url: '', written: 0, open: 0,
    scenario: { delayMs: 0, status: 200, contentType: 'application/json', body: { kind: 'json', text: '{}', end: 'close' } },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = createServer((req, res) => void answer(state, req, res));
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return state;
}

async function answer(state: GarbageUpstream, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const plan = state.scenario;
  const received: Buffer[] = [];
  for await (const chunk of req) received.push(chunk as Buffer);
  const asked = JSON.parse(Buffer.concat(received).toString('utf8')) as { stream?: boolean };
  state.open += 1;
  let gone = false;
  res.on('close', () => {
    gone = true;
    state.open -= 1;
  });
  const write = async (data: string | Uint8Array): Promise<void> => {
    if (gone) return;
    state.written += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    if (res.write(data)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
  };
  if (plan.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, plan.delayMs));
  if (gone) return;
  // 'auto': the content type of the mode asked for.
  const type = plan.contentType === 'auto' ? (asked.stream === true ? 'text/event-stream' : 'application/json') : plan.contentType;
  res.writeHead(plan.status, type === null ? {} : { 'content-type': type });
  const body = plan.body;
  if (body.kind === 'endless') {
    // Until the gateway goes away, however long that takes.
    // Each piece waits for the event loop, so that an answer Node discards (204, 304) cannot spin it.
    while (!gone) {
      await write(body.unit);
      await new Promise((resolve) => setImmediate(resolve));
    }
    return;
  }
  if (body.kind === 'enormous') {
    for (let sent = 0; sent < body.bytes && !gone; sent += body.unit.length) {
      await write(body.unit);
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (!gone) res.end();
    return;
  }
  if (body.kind === 'plausible') {
    const parts = plausibleParts(body, asked.stream === true);
    for (const part of parts.slice(0, body.cutAfter ?? parts.length)) await write(part);
    if (body.cutAfter === null) res.end();
    else res.socket?.destroy();
    return;
  }
  const parts = body.kind === 'sse' ? body.frames : [body.kind === 'json' ? body.text : body.bytes];
  for (const part of parts) await write(part);
  if (body.end === 'close') res.end();
  else if (body.end === 'cut') res.socket?.destroy();
  // 'hang': the body stays open; the gateway's timeouts must end it.
}

/** A plausible answer's pieces: SSE frames, or a JSON completion in two halves (so that a cut splits it). */
function plausibleParts(plan: Extract<BodyPlan, { kind: 'plausible' }>, stream: boolean): string[] {
  const usage = plan.usage === null ? '' : `,"usage":${plan.usage}`;
  if (!stream) {
    const text = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(plan.words.join(' '))}},"finish_reason":${plan.finish}}]${usage}}`;
    return [text.slice(0, text.length >> 1), text.slice(text.length >> 1)];
  }
  return [
    ...plan.words.map((w) => data(chunk(`[{"index":0,"delta":{"content":${JSON.stringify(`${w} `)}},"finish_reason":null}]`))),
    data(chunk(`[{"index":0,"delta":{},"finish_reason":${plan.finish}}]`)),
    ...(plan.usage === null ? [] : [data(chunk('[]', plan.usage))]),
    ...(plan.done ? ['data: [DONE]\n\n'] : []),
  ];
}

const word = fc.constantFrom('alpha', 'beta', 'gamma', ' ', '\n', 'é', '😀', '\u0000', '"', '\\', '</s>');
const content = fc.array(word, { maxLength: 12 }).map((w) => w.join(' '));

/** Usage figures right and wrong: negative, huge, fractional, NaN-like, strings, missing. */
const figure = fc.oneof(
  { weight: 3, arbitrary: fc.nat({ max: 200 }).map(String) },
  { weight: 2, arbitrary: fc.constantFrom('-1', '-100000', '1e308', '1e999', '-1e999', '1.5', '9007199254740993', '"NaN"', '"12"', 'null', 'true', '[]', '{}') },
);
const usageLiteral = fc.oneof(
  fc.tuple(figure, figure, figure).map(([p, c, t]) => `{"prompt_tokens":${p},"completion_tokens":${c},"total_tokens":${t}}`),
  fc.tuple(figure).map(([c]) => `{"completion_tokens":${c}}`),
  fc.constantFrom('null', '"lots"', '[]', '{}', '-5'),
);

const chunk = (choices: string, usage?: string) =>
  `{"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":${choices}${usage === undefined ? '' : `,"usage":${usage}`}}`;
const data = (payload: string) => `data: ${payload}\n\n`;

/** One SSE frame: right, of the wrong types, broken, or not SSE at all. */
const frame = fc.oneof(
  { weight: 6, arbitrary: content.map((c) => data(chunk(`[{"index":0,"delta":{"content":${JSON.stringify(c)}},"finish_reason":null}]`))) },
  { weight: 2, arbitrary: fc.constantFrom('"stop"', '"length"', '"tool_calls"', '"weird"', '5', 'null', '{}')
    .map((f) => data(chunk(`[{"index":0,"delta":{},"finish_reason":${f}}]`))) },
  { weight: 2, arbitrary: usageLiteral.map((u) => data(chunk('[]', u))) },
  { weight: 2, arbitrary: fc.constantFrom(
    '"x"', '[{"delta":5}]', '[{"delta":{"content":5}}]', '[{"delta":{"content":{"a":1}}}]', '{}', 'null', '[null]',
    '[{"delta":{"tool_calls":[{"index":"a","function":{"arguments":5}}]}}]', '[{"delta":{"tool_calls":[{"index":99999999,"id":"c","function":{"name":"f","arguments":"{"}}]}}]',
    '[{"delta":{"tool_calls":"x"}}]', '[{"delta":{"role":"assistant","content":null}}]',
  ).map((c) => data(chunk(c))) },
  { weight: 1, arbitrary: fc.constant('data: [DONE]\n\n') },
  { weight: 1, arbitrary: fc.constantFrom(': ping\n\n', 'event: error\ndata: {"error":{"message":"boom"}}\n\n', 'retry: 10\n\n', 'id: 5\n\n', '\n\n\n', 'data:\n\n') },
  { weight: 2, arbitrary: fc.string({ maxLength: 80, unit: 'binary' }).map((s) => `data: ${s}\n\n`) },
  { weight: 1, arbitrary: fc.string({ maxLength: 80, unit: 'binary' }) },
  { weight: 1, arbitrary: fc.tuple(content, fc.nat()).map(([c, n]) => {
    const whole = data(chunk(`[{"index":0,"delta":{"content":${JSON.stringify(c)}},"finish_reason":null}]`));
    return whole.slice(0, n % whole.length);
  }) },
  { weight: 1, arbitrary: content.map((c) => `data: ${chunk(`[{"index":0,"delta":{"content":${JSON.stringify(c)}},"finish_reason":null}]`)}\r\n\r\n`) },
);

/** A JSON completion: right, of the wrong types, with wrong usage, or cut short. */
const completionJson = fc.oneof(
  fc.tuple(content, fc.constantFrom('"stop"', '"length"', '5', 'null', '"x"'), usageLiteral).map(([c, f, u]) =>
    `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(c)}},"finish_reason":${f}}],"usage":${u}}`),
  fc.constantFrom('{}', '[]', 'null', '{"choices":[]}', '{"choices":"x"}', '{"choices":[{"message":{"content":5},"finish_reason":"stop"}]}',
    '{"choices":[{"message":null}]}', '{"error":{"message":"upstream broke","type":"server_error"}}', '{"choices":[{"message":{"content":"a","tool_calls":5},"finish_reason":"stop"}]}'),
  fc.json({ maxDepth: 3 }),
);

const ending = fc.constantFrom<Ending>('close', 'close', 'close', 'cut', 'hang');

export const bodyPlan: fc.Arbitrary<BodyPlan> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('sse' as const), frames: fc.array(frame, { maxLength: 12 }), end: ending }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('json' as const), text: completionJson, end: ending }) },
  { weight: 1, arbitrary: fc.tuple(completionJson, fc.nat()).map(([t, n]): BodyPlan => ({ kind: 'json', text: t.slice(0, n % (t.length + 1)), end: 'close' })) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('bytes' as const), bytes: fc.uint8Array({ maxLength: 2000 }), end: ending }) },
  { weight: 1, arbitrary: fc.record({
    kind: fc.constant('enormous' as const), bytes: fc.integer({ min: 100_000, max: 12_000_000 }),
    unit: fc.constantFrom(data(chunk('[{"index":0,"delta":{"content":"word word word word "},"finish_reason":null}]')), 'x'.repeat(65_536), 'data: ' + 'y'.repeat(65_530)),
  }) },
  { weight: 1, arbitrary: fc.record({
    kind: fc.constant('endless' as const),
    unit: fc.constantFrom(data(chunk('[{"index":0,"delta":{"content":"more "},"finish_reason":null}]')), ': ping\n\n', 'z'.repeat(16_384), data(chunk('[]', '{"completion_tokens":1}'))),
  }) },
);

const plausible: fc.Arbitrary<Scenario> = fc.record({
  delayMs: fc.constant(0),
  status: fc.constant(200),
  contentType: fc.oneof({ weight: 4, arbitrary: fc.constant<string | null>('auto') }, { weight: 1, arbitrary: fc.constantFrom<string | null>('text/event-stream', 'application/json', null) }),
  body: fc.record({
    kind: fc.constant('plausible' as const),
    words: fc.array(word, { maxLength: 200 }),
    finish: fc.oneof({ weight: 4, arbitrary: fc.constant('"stop"') }, { weight: 1, arbitrary: fc.constantFrom('"length"', '"tool_calls"', '"odd"', '5', 'null') }),
    usage: fc.option(usageLiteral, { nil: null, freq: 5 }),
    done: fc.boolean(),
    cutAfter: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.nat({ max: 30 }) }),
  }),
});

const anything: fc.Arbitrary<Scenario> = fc.record({
  delayMs: fc.oneof({ weight: 9, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constantFrom(50, 500) }),
  status: fc.oneof(
    { weight: 6, arbitrary: fc.constant(200) },
    { weight: 3, arbitrary: fc.constantFrom(201, 202, 203, 204, 206, 226, 300, 301, 302, 304, 307, 400, 401, 402, 403, 404, 408, 409, 413, 422, 429, 451, 500, 501, 502, 503, 504, 520, 599) },
  ),
  contentType: fc.constantFrom<string | null>('text/event-stream', 'application/json', 'application/json; charset=utf-8', 'text/plain', 'text/html', null, 'text/event-stream; charset=utf-8'),
  body: bodyPlan,
});

/** Half nearly right answers (the charge path, with wrong usage figures), half anything at all. */
export const scenario: fc.Arbitrary<Scenario> = fc.oneof(plausible, anything);
