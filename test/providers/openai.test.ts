import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOpenAiAdapter, type OpenAiAdapter } from '../../src/providers/openai.js';
import {
  DEFAULT_ROUTE_PARAMS,
  UpstreamError,
  type AttemptContext,
  type UpstreamEvent,
  type UpstreamFailure,
  type UpstreamRequest,
} from '../../src/providers/types.js';
import { countWords, startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';

const REPLY = 'The quick brown fox jumps over the lazy dog.';

function requestFor(model: string, overrides: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return {
    model,
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Tell me a short story please' },
    ],
    maxTokens: 100,
    temperature: 0.7,
    topP: 1,
    params: DEFAULT_ROUTE_PARAMS,
    callerSet: { temperature: false, topP: false },
    ...overrides,
  };
}

function context(signal = new AbortController().signal): AttemptContext & { firstBytes: number } {
  const ctx = {
    signal,
    firstBytes: 0,
    onFirstByte() {
      ctx.firstBytes++;
    },
  };
  return ctx;
}

async function collect(source: AsyncIterable<UpstreamEvent>): Promise<UpstreamEvent[]> {
  const events: UpstreamEvent[] = [];
  for await (const event of source) events.push(event);
  return events;
}

function failsWith(failure: UpstreamFailure, status: number | null = null) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof UpstreamError, `not an UpstreamError: ${String(error)}`);
    assert.equal(error.failure, failure, error.message);
    assert.equal(error.status, status);
    return true;
  };
}

const promptWords = countWords('Be brief.') + countWords('Tell me a short story please');

describe('openai adapter against the fake upstream', () => {
  let upstream: FakeUpstream;
  let adapter: OpenAiAdapter;

  before(async () => {
    upstream = await startFakeUpstream({ reply: REPLY });
    adapter = createOpenAiAdapter({ id: 'fake', baseUrl: `${upstream.url}/`, apiKey: 'sk-test', headersTimeoutMs: 2000 });
  });
  after(async () => {
    await adapter.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  it('completes with the reply, finish reason and usage; calls onFirstByte', async () => {
    const ctx = context();
    const completion = await adapter.complete(requestFor('gpt-test'), ctx);
    assert.deepEqual(completion, {
      content: REPLY,
      finishReason: 'stop',
      usage: { promptTokens: promptWords, completionTokens: countWords(REPLY) },
    });
    assert.equal(ctx.firstBytes, 1);
  });

  it('sends the request in OpenAI words, optional fields only when set', async () => {
    const request = requestFor('gpt-test', { maxTokens: 3, stop: ['\n'], seed: 7, user: 'u1', responseFormat: { type: 'text' } });
    request.messages.push({ role: 'tool', content: '42', toolCallId: 'call_1', name: 'calc' });
    const completion = await adapter.complete(request, context());
    assert.equal(completion.content, 'The quick brown');
    assert.equal(completion.finishReason, 'length');

    const [received] = upstream.requests;
    assert.ok(received);
    assert.equal(received.headers.authorization, 'Bearer sk-test');
    assert.deepEqual(received.body, {
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Tell me a short story please' },
        { role: 'tool', content: '42', name: 'calc', tool_call_id: 'call_1' },
      ],
      max_tokens: 3,
      temperature: 0.7,
      top_p: 1,
      stream: false,
      stop: ['\n'],
      seed: 7,
      user: 'u1',
      response_format: { type: 'text' },
    });
  });

  it('sends no Authorization without an api key', async () => {
    const keyless = createOpenAiAdapter({ id: 'keyless', baseUrl: upstream.url });
    try {
      await keyless.complete(requestFor('gpt-test'), context());
      assert.equal(upstream.requests[0]?.headers.authorization, undefined);
    } finally {
      await keyless.close();
    }
  });

  it('returns null usage when the upstream reports none', async () => {
    const completion = await adapter.complete(requestFor('gpt-no-usage'), context());
    assert.equal(completion.usage, null);
  });

  it('streams deltas that join into the reply, then finish, then usage', async () => {
    const events = await collect(adapter.stream(requestFor('gpt-test'), context()));
    const deltas = events.filter((event) => event.type === 'delta');
    assert.equal(deltas.map((event) => event.content).join(''), REPLY);
    assert.equal(deltas.length, countWords(REPLY));
    assert.deepEqual(events.slice(deltas.length), [
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: promptWords, completionTokens: countWords(REPLY) } },
    ]);
    const body = upstream.requests[0]?.body;
    assert.equal(body?.stream, true);
    assert.deepEqual(body?.stream_options, { include_usage: true });
  });

  it('streams a cut reply with finish reason length and no usage when none is sent', async () => {
    const events = await collect(adapter.stream(requestFor('gpt-no-usage', { maxTokens: 2 }), context()));
    assert.deepEqual(events, [
      { type: 'delta', content: 'The' },
      { type: 'delta', content: ' quick' },
      { type: 'finish', finishReason: 'length' },
    ]);
    assert.equal(upstream.requests[0]?.body.max_tokens, 2);
  });

  for (const [model, status] of [['gpt-error-500', 500], ['gpt-error-429', 429], ['gpt-error-400', 400]] as const) {
    it(`maps ${status} to a status failure, in both modes`, async () => {
      await assert.rejects(adapter.complete(requestFor(model), context()), failsWith('status', status));
      await assert.rejects(collect(adapter.stream(requestFor(model), context())), failsWith('status', status));
    });
  }

  it('maps a body that is not JSON, or a chunk that is not, to malformed', async () => {
    await assert.rejects(adapter.complete(requestFor('gpt-malformed'), context()), failsWith('malformed'));
    await assert.rejects(collect(adapter.stream(requestFor('gpt-malformed'), context())), failsWith('malformed'));
  });

  it('fails a request it cannot write as its own failure (request), and sends nothing', async () => {
    const cyclic: Record<string, unknown> = { type: 'json_schema' };
    cyclic.self = cyclic;
    await assert.rejects(collect(adapter.stream(requestFor('gpt-test', { responseFormat: cyclic }), context())), failsWith('request'));
    await assert.rejects(adapter.complete(requestFor('gpt-test', { responseFormat: cyclic }), context()), failsWith('request'));
    assert.equal(upstream.requests.length, 0);
  });

  it('maps a reset socket to a connection failure', async () => {
    await assert.rejects(adapter.complete(requestFor('gpt-reset'), context()), failsWith('connection'));
    await assert.rejects(collect(adapter.stream(requestFor('gpt-reset'), context())), failsWith('connection'));
  });

  it('maps a body cut short to a connection failure, after the deltas that came', async () => {
    await assert.rejects(adapter.complete(requestFor('gpt-cut'), context()), failsWith('connection'));
    const received: UpstreamEvent[] = [];
    await assert.rejects(async () => {
      for await (const event of adapter.stream(requestFor('gpt-cut'), context())) received.push(event);
    }, failsWith('connection'));
    assert.deepEqual(received, [
      { type: 'delta', content: 'The' },
      { type: 'delta', content: ' quick' },
    ]);
  });

  it('maps an upstream that never answers to a timeout', async () => {
    const impatient = createOpenAiAdapter({ id: 'impatient', baseUrl: upstream.url, headersTimeoutMs: 100 });
    try {
      await assert.rejects(impatient.complete(requestFor('gpt-hang'), context()), failsWith('timeout'));
      await assert.rejects(collect(impatient.stream(requestFor('gpt-hang'), context())), failsWith('timeout'));
    } finally {
      await impatient.close();
    }
  });

  it('waits for a slow upstream', async () => {
    const completion = await adapter.complete(requestFor('gpt-slow-50'), context());
    assert.equal(completion.content, REPLY);
  });

  it('maps an aborted signal to aborted, before and during the stream', async () => {
    const waiting = new AbortController();
    const pending = adapter.complete(requestFor('gpt-hang'), context(waiting.signal));
    setTimeout(() => waiting.abort(), 20);
    await assert.rejects(pending, (error) => failsWith('aborted')(error) && !(error as UpstreamError).retryable);

    const streaming = new AbortController();
    const received: UpstreamEvent[] = [];
    const started = Date.now();
    await assert.rejects(async () => {
      for await (const event of adapter.stream(requestFor('gpt-stall-5000'), context(streaming.signal))) {
        received.push(event);
        streaming.abort();
      }
    }, failsWith('aborted'));
    assert.deepEqual(received, [{ type: 'delta', content: 'The' }]);
    assert.ok(Date.now() - started < 2000);
  });

  it('releases the upstream when the consumer stops early', async () => {
    const own = createOpenAiAdapter({ id: 'own', baseUrl: upstream.url });
    for await (const event of own.stream(requestFor('gpt-stall-5000'), context())) {
      assert.deepEqual(event, { type: 'delta', content: 'The' });
      break;
    }
    // close() waits for requests in flight: it returns at once only if the body was destroyed.
    const started = Date.now();
    await own.close();
    assert.ok(Date.now() - started < 1000);
  });
});

describe('openai adapter against scripted streams', () => {
  let server: Server;
  let body = '';
  let connections = 0;
  let port = 0;
  let adapter: OpenAiAdapter;

  before(async () => {
    server = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // The end comes a little after the body, as it can on a real network.
      res.write(body, () => setTimeout(() => res.end(), 20));
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
    adapter = createOpenAiAdapter({ id: 'scripted', baseUrl: `http://127.0.0.1:${port}/v1` });
  });
  after(async () => {
    await adapter.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const chunk = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;

  it('maps a chunk with an error field to malformed', async () => {
    body = chunk({ choices: [{ delta: { content: 'Hi' } }] }) + chunk({ error: { message: 'overloaded' } });
    await assert.rejects(collect(adapter.stream(requestFor('m'), context())), failsWith('malformed'));
  });

  it('maps an end without [DONE] or a finish to a connection failure', async () => {
    body = chunk({ choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] });
    await assert.rejects(collect(adapter.stream(requestFor('m'), context())), (error) => {
      assert.ok(failsWith('connection')(error));
      assert.match((error as Error).message, /stream ended early/);
      return true;
    });
  });

  it('accepts an end without [DONE] after a finish; maps unknown finish reasons to stop', async () => {
    body = ': keep-alive\n\n' + chunk({ choices: [{ delta: { content: 'Hi' }, finish_reason: 'eos' }] });
    assert.deepEqual(await collect(adapter.stream(requestFor('m'), context())), [
      { type: 'delta', content: 'Hi' },
      { type: 'finish', finishReason: 'stop' },
    ]);
  });

  it('takes usage sent with the finish chunk, and ignores anything after [DONE]', async () => {
    body =
      chunk({ choices: [{ delta: { content: 'Hi' }, finish_reason: 'length' }], usage: { prompt_tokens: 4, completion_tokens: 1 } }) +
      'data: [DONE]\n\n' +
      chunk({ choices: [{ delta: { content: 'late' } }] });
    assert.deepEqual(await collect(adapter.stream(requestFor('m'), context())), [
      { type: 'delta', content: 'Hi' },
      { type: 'finish', finishReason: 'length' },
      { type: 'usage', usage: { promptTokens: 4, completionTokens: 1 } },
    ]);
  });

  it('streams tool calls as typed pieces: id and name first, then argument fragments', async () => {
    body =
      chunk({ choices: [{ delta: { role: 'assistant', content: null, tool_calls: [
        { index: 0, id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '' } },
        { index: 1, id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{}' } },
      ] } }] }) +
      chunk({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] } }] }) +
      chunk({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }, { nonsense: true }] }, finish_reason: 'tool_calls' }] }) +
      'data: [DONE]\n\n';
    assert.deepEqual(await collect(adapter.stream(requestFor('m'), context())), [
      { type: 'tool_call', index: 0, id: 'call_1', name: 'get_weather', arguments: '' },
      { type: 'tool_call', index: 1, id: 'call_2', name: 'get_time', arguments: '{}' },
      { type: 'tool_call', index: 0, arguments: '{"city":' },
      { type: 'tool_call', index: 0, arguments: '"Paris"}' },
      { type: 'finish', finishReason: 'tool_calls' },
    ]);
  });

  it('reads the tool calls of a JSON answer', async () => {
    body = JSON.stringify({ choices: [{ message: { content: null, tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
    ] }, finish_reason: 'tool_calls' }] });
    assert.deepEqual(await adapter.complete(requestFor('m'), context()), {
      content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }], finishReason: 'tool_calls', usage: null,
    });
  });

  it('maps a JSON body without the expected shape to malformed, null content to empty', async () => {
    body = JSON.stringify({ choices: [] });
    await assert.rejects(adapter.complete(requestFor('m'), context()), failsWith('malformed'));
    body = JSON.stringify({ choices: [{ message: { content: 'x' }, finish_reason: null }] });
    await assert.rejects(adapter.complete(requestFor('m'), context()), failsWith('malformed'));
    body = JSON.stringify({ choices: [{ message: { content: null }, finish_reason: 'tool_calls' }], usage: { prompt_tokens: 1.5 } });
    assert.deepEqual(await adapter.complete(requestFor('m'), context()), { content: '', finishReason: 'tool_calls', usage: null });
  });

  it('keeps one connection across requests, reading a stream to its end after [DONE]', async () => {
    const done = chunk({ choices: [{ delta: { content: 'Hi' }, finish_reason: 'stop' }] }) + 'data: [DONE]\n\n';
    const json = JSON.stringify({ choices: [{ message: { content: 'Hi' }, finish_reason: 'stop' }] });
    const fresh = createOpenAiAdapter({ id: 'fresh', baseUrl: `http://127.0.0.1:${port}/v1`, connections: 1 });
    const before = connections;
    try {
      for (let i = 0; i < 3; i++) {
        body = done;
        await collect(fresh.stream(requestFor('m'), context()));
        body = json;
        await fresh.complete(requestFor('m'), context());
      }
    } finally {
      await fresh.close();
    }
    assert.equal(connections - before, 1);
  });
});

describe('openai adapter without an upstream', () => {
  it('maps a refused connection to a connection failure', async () => {
    const upstream = await startFakeUpstream();
    const url = upstream.url;
    await upstream.close();
    const adapter = createOpenAiAdapter({ id: 'gone', baseUrl: url });
    try {
      await assert.rejects(adapter.complete(requestFor('gpt-test'), context()), failsWith('connection'));
      await assert.rejects(collect(adapter.stream(requestFor('gpt-test'), context())), failsWith('connection'));
    } finally {
      await adapter.close();
    }
  });
});
