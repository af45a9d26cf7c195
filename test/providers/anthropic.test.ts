import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Answer } from '../../src/gateway/answer.js';
import { createAnthropicAdapter, messagesUrl, type AnthropicAdapter } from '../../src/providers/anthropic.js';
import {
  DEFAULT_ROUTE_PARAMS, UpstreamError, type AttemptContext, type UpstreamEvent, type UpstreamFailure, type UpstreamRequest,
} from '../../src/providers/types.js';
import {
  ANTHROPIC_CACHE_USAGE, ANTHROPIC_TOOL_ID, ANTHROPIC_TOOL_INPUT_PIECES, ANTHROPIC_TOOL_PREAMBLE, countWords, startFakeAnthropic,
  type FakeAnthropic,
} from '../support/fake-anthropic.js';

const REPLY = 'The quick brown fox jumps over the lazy dog.';
const WEATHER_TOOL = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
};

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
  const ctx = { signal, firstBytes: 0, onFirstByte() { ctx.firstBytes++; } };
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
    assert.equal(error.status, status, error.message);
    return true;
  };
}

function answerOf(events: UpstreamEvent[]): Answer {
  const answer = new Answer();
  for (const event of events) answer.add(event);
  return answer;
}

const promptWords = countWords('Be brief.') + countWords('Tell me a short story please');
const usage = (prompt: number, completion: number) => ({ promptTokens: prompt, completionTokens: completion, cachedTokens: 0 });

describe('anthropic adapter against the fake Messages API', () => {
  let fake: FakeAnthropic;
  let adapter: AnthropicAdapter;

  before(async () => {
    fake = await startFakeAnthropic(REPLY);
    adapter = createAnthropicAdapter({ id: 'anthropic', baseUrl: `${fake.url}/`, apiKey: 'sk-ant-test', headersTimeoutMs: 2000 });
  });
  after(async () => {
    await adapter.close();
    await fake.close();
  });
  beforeEach(() => fake.reset());

  it('posts to {base_url}/v1/messages, https://api.anthropic.com by default', () => {
    assert.equal(messagesUrl('https://api.anthropic.com').href, 'https://api.anthropic.com/v1/messages');
    assert.equal(messagesUrl('https://proxy.example/anthropic/').href, 'https://proxy.example/anthropic/v1/messages');
  });

  it('completes with the reply, finish reason and usage; calls onFirstByte; sends key, version and max_tokens', async () => {
    const ctx = context();
    const completion = await adapter.complete(requestFor('claude-ok'), ctx);
    assert.deepEqual(completion, { content: REPLY, finishReason: 'stop', usage: usage(promptWords, countWords(REPLY)) });
    assert.equal(ctx.firstBytes, 1);
    const [received] = fake.requests;
    assert.equal(received?.headers['x-api-key'], 'sk-ant-test');
    assert.equal(received?.headers['anthropic-version'], '2023-06-01');
    assert.equal(received?.headers.accept, 'application/json');
    assert.deepEqual(received?.body, {
      model: 'claude-ok', max_tokens: 100, system: 'Be brief.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me a short story please' }] }],
      temperature: 0.7, stream: false,
    });
  });

  it('sends the configured version, and no x-api-key without a key (which Anthropic refuses: 401)', async () => {
    const keyless = createAnthropicAdapter({ id: 'keyless', baseUrl: fake.url, version: '2024-01-01' });
    try {
      await assert.rejects(keyless.complete(requestFor('claude-ok'), context()), failsWith('status', 401));
      assert.equal(fake.requests[0]?.headers['x-api-key'], undefined);
      assert.equal(fake.requests[0]?.headers['anthropic-version'], '2024-01-01');
    } finally {
      await keyless.close();
    }
  });

  it('streams deltas that join into the reply, then finish, then usage (cumulative output, not added to message_start\'s)', async () => {
    const events = await collect(adapter.stream(requestFor('claude-ok'), context()));
    const deltas = events.filter((event) => event.type === 'delta');
    assert.equal(deltas.map((event) => event.content).join(''), REPLY);
    assert.deepEqual(events.slice(deltas.length), [
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: usage(promptWords, countWords(REPLY)) },
    ]);
    assert.equal(fake.requests[0]?.body.stream, true);
    assert.equal(fake.requests[0]?.headers.accept, 'text/event-stream');
  });

  it('sends system and developer messages from anywhere into system, merges turns, and the fake accepts it', async () => {
    const request = requestFor('claude-ok', {
      messages: [
        { role: 'system', content: 'Rule one.' },
        { role: 'user', content: 'Part one.' },
        { role: 'user', content: 'Part two.' },
        { role: 'system', content: 'Rule two.' },
        { role: 'assistant', content: 'Noted.' },
        { role: 'assistant', content: 'Go on.' },
        { role: 'user', content: 'Done.' },
      ],
    });
    const completion = await adapter.complete(request, context());
    assert.equal(completion.content, REPLY);
    const body = fake.requests[0]?.body;
    assert.equal(body?.system, 'Rule one.\n\nRule two.');
    assert.deepEqual(body?.messages, [
      { role: 'user', content: [{ type: 'text', text: 'Part one.' }, { type: 'text', text: 'Part two.' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Noted.' }, { type: 'text', text: 'Go on.' }] },
      { role: 'user', content: [{ type: 'text', text: 'Done.' }] },
    ]);
    assert.deepEqual(completion.usage, usage(countWords('Rule one. Rule two. Part one. Part two. Noted. Go on. Done.'), countWords(REPLY)));
  });

  it('sends tool history as tool_use blocks and all tool results in one user turn with the next user message', async () => {
    const request = requestFor('claude-ok', {
      messages: [
        { role: 'user', content: 'Weather in Paris and Oslo?' },
        { role: 'assistant', content: '', toolCalls: [
          { id: 'toolu_a', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { id: 'toolu_b', name: 'get_weather', arguments: '{"city":"Oslo"}' },
        ] },
        { role: 'tool', content: '18C', toolCallId: 'toolu_a' },
        { role: 'tool', content: '4C', toolCallId: 'toolu_b' },
        { role: 'user', content: 'Which is warmer?' },
      ],
      tools: [WEATHER_TOOL],
    });
    assert.equal((await adapter.complete(request, context())).content, REPLY);
    const messages = fake.requests[0]?.body.messages;
    assert.ok(Array.isArray(messages));
    assert.equal(messages.length, 3);
    assert.deepEqual(messages[2], {
      role: 'user', content: [
        { type: 'tool_result', tool_use_id: 'toolu_a', content: '18C' },
        { type: 'tool_result', tool_use_id: 'toolu_b', content: '4C' },
        { type: 'text', text: 'Which is warmer?' },
      ],
    });
  });

  it('maps tools and tool_choice, and returns tool_use as tool calls in a whole answer', async () => {
    const request = requestFor('claude-tools', { tools: [WEATHER_TOOL], toolChoice: 'required', parallelToolCalls: false });
    const completion = await adapter.complete(request, context());
    assert.deepEqual(completion, {
      content: ANTHROPIC_TOOL_PREAMBLE,
      toolCalls: [{ id: ANTHROPIC_TOOL_ID, name: 'get_weather', arguments: JSON.stringify(JSON.parse(ANTHROPIC_TOOL_INPUT_PIECES.join(''))) }],
      finishReason: 'tool_calls',
      usage: usage(promptWords, countWords(ANTHROPIC_TOOL_PREAMBLE) + countWords(ANTHROPIC_TOOL_INPUT_PIECES.join(''))),
    });
    const body = fake.requests[0]?.body;
    assert.deepEqual(body?.tools, [{ name: 'get_weather', description: 'Weather for a city', input_schema: WEATHER_TOOL.function.parameters }]);
    assert.deepEqual(body?.tool_choice, { type: 'any', disable_parallel_tool_use: true });
  });

  it('streams tool_use as tool-call pieces: our own index, id and name first, input_json_delta pieces as arguments', async () => {
    const events = await collect(adapter.stream(requestFor('claude-tools', { tools: [WEATHER_TOOL], toolChoice: { type: 'function', function: { name: 'get_weather' } } }), context()));
    assert.deepEqual(events.filter((event) => event.type === 'tool_call'), [
      { type: 'tool_call', index: 0, id: ANTHROPIC_TOOL_ID, name: 'get_weather', arguments: '' },
      ...ANTHROPIC_TOOL_INPUT_PIECES.map((piece) => ({ type: 'tool_call', index: 0, arguments: piece })),
    ]);
    const answer = answerOf(events);
    assert.equal(answer.content, ANTHROPIC_TOOL_PREAMBLE);
    assert.equal(answer.finishReason, 'tool_calls');
    assert.deepEqual(fake.requests[0]?.body.tool_choice, { type: 'tool', name: 'get_weather' });
  });

  it('gives a tool called without arguments "{}", in a whole answer and in a stream', async () => {
    const request = requestFor('claude-tools-noargs', { tools: [{ type: 'function', function: { name: 'get_time' } }], toolChoice: 'auto' });
    const completion = await adapter.complete(request, context());
    assert.deepEqual(completion.toolCalls, [{ id: ANTHROPIC_TOOL_ID, name: 'get_time', arguments: '{}' }]);
    const answer = answerOf(await collect(adapter.stream(request, context())));
    assert.deepEqual(answer.toolCalls, [{ id: ANTHROPIC_TOOL_ID, name: 'get_time', arguments: '{}' }]);
    assert.deepEqual(fake.requests[0]?.body.tools, [{ name: 'get_time', input_schema: { type: 'object', properties: {} } }]);
    assert.deepEqual(fake.requests[0]?.body.tool_choice, { type: 'auto' });
  });

  it('sends stop as stop_sequences: the reply stops there with finish reason stop', async () => {
    const completion = await adapter.complete(requestFor('claude-ok', { stop: ['fox'] }), context());
    assert.equal(completion.content, 'The quick brown');
    assert.equal(completion.finishReason, 'stop');
    assert.deepEqual(fake.requests[0]?.body.stop_sequences, ['fox']);
  });

  it('maps max_tokens to length, refusal to content_filter and pause_turn to stop, in both modes', async () => {
    const cases = [['claude-ok', 2, 'length'], ['claude-refusal', 100, 'content_filter'], ['claude-pause-turn', 100, 'stop']] as const;
    for (const [model, maxTokens, finish] of cases) {
      assert.equal((await adapter.complete(requestFor(model, { maxTokens }), context())).finishReason, finish, model);
      const events = await collect(adapter.stream(requestFor(model, { maxTokens }), context()));
      assert.equal(answerOf(events).finishReason, finish, model);
    }
    assert.deepEqual(fake.requests.map((r) => r.body.max_tokens), [2, 2, 100, 100, 100, 100]);
  });

  it('clamps temperature to 1 and passes the caller\'s top_p (the fake refuses temperature above 1)', async () => {
    await adapter.complete(requestFor('claude-ok', { temperature: 1.8, topP: 0.5, callerSet: { temperature: true, topP: true } }), context());
    assert.equal(fake.requests[0]?.body.temperature, 1);
    assert.equal(fake.requests[0]?.body.top_p, 0.5);
  });

  it('sends user as metadata.user_id and no OpenAI-only field (the fake refuses unknown fields)', async () => {
    await adapter.complete(requestFor('claude-ok', { user: 'user-42', responseFormat: { type: 'text' }, presencePenalty: 0 }), context());
    assert.deepEqual(fake.requests[0]?.body.metadata, { user_id: 'user-42' });
  });

  it('reports cache tokens: the prompt is input plus cache writes and reads; the reads are cached', async () => {
    const { cache_creation_input_tokens: written, cache_read_input_tokens: read } = ANTHROPIC_CACHE_USAGE;
    const expected = { promptTokens: promptWords + written + read, completionTokens: countWords(REPLY), cachedTokens: read };
    assert.deepEqual((await adapter.complete(requestFor('claude-cache'), context())).usage, expected);
    assert.deepEqual(answerOf(await collect(adapter.stream(requestFor('claude-cache'), context()))).usage, expected);
  });

  it('skips ping events between deltas', async () => {
    const events = await collect(adapter.stream(requestFor('claude-ping'), context()));
    assert.equal(answerOf(events).content, REPLY);
    assert.equal(events.filter((event) => event.type === 'delta').length, countWords(REPLY));
  });

  it('continues a prefix: sent as the final assistant turn without its trailing whitespace, which is not doubled', async () => {
    assert.equal(adapter.continues(DEFAULT_ROUTE_PARAMS), true);
    const prefix = 'Once upon ';
    const completion = await adapter.complete(requestFor('claude-ok', { prefix }), context());
    assert.equal(completion.content, REPLY);
    assert.deepEqual(fake.requests[0]?.body.messages, [
      { role: 'user', content: [{ type: 'text', text: 'Tell me a short story please' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'Once upon' }] },
    ]);
    const streamed = answerOf(await collect(adapter.stream(requestFor('claude-ok', { prefix }), context())));
    assert.equal(prefix + streamed.content, `${prefix}${REPLY}`);
    // Without the cut whitespace dropped, the continuation would start with the space the fake sends.
    const untrimmed = answerOf(await collect(adapter.stream(requestFor('claude-ok', { prefix: 'Once upon' }), context())));
    assert.equal(untrimmed.content, ` ${REPLY}`);
  });

  for (const [model, status] of [['claude-error-500', 500], ['claude-error-429', 429], ['claude-error-529', 529], ['claude-error-400', 400]] as const) {
    it(`maps ${status} to a status failure, in both modes`, async () => {
      await assert.rejects(adapter.complete(requestFor(model), context()), failsWith('status', status));
      await assert.rejects(collect(adapter.stream(requestFor(model), context())), failsWith('status', status));
    });
  }

  it('fails an overloaded error event before any content as a 529, with no events', async () => {
    const received: UpstreamEvent[] = [];
    await assert.rejects(async () => {
      for await (const event of adapter.stream(requestFor('claude-error-event'), context())) received.push(event);
    }, failsWith('status', 529));
    assert.deepEqual(received, []);
  });

  it('fails an overloaded error event after content as a 529, after the deltas that came', async () => {
    const received: UpstreamEvent[] = [];
    await assert.rejects(async () => {
      for await (const event of adapter.stream(requestFor('claude-error-after'), context())) received.push(event);
    }, failsWith('status', 529));
    assert.deepEqual(received, [{ type: 'delta', content: 'The' }, { type: 'delta', content: ' quick' }]);
  });

  it('maps a body that is not JSON, or an event that is not, to malformed', async () => {
    await assert.rejects(adapter.complete(requestFor('claude-malformed'), context()), failsWith('malformed'));
    await assert.rejects(collect(adapter.stream(requestFor('claude-malformed'), context())), failsWith('malformed'));
  });

  it('maps a reset socket, and a body cut short, to a connection failure (after the deltas that came)', async () => {
    await assert.rejects(adapter.complete(requestFor('claude-reset'), context()), failsWith('connection'));
    await assert.rejects(collect(adapter.stream(requestFor('claude-reset'), context())), failsWith('connection'));
    await assert.rejects(adapter.complete(requestFor('claude-cut'), context()), failsWith('connection'));
    const received: UpstreamEvent[] = [];
    await assert.rejects(async () => {
      for await (const event of adapter.stream(requestFor('claude-cut'), context())) received.push(event);
    }, failsWith('connection'));
    assert.deepEqual(received, [{ type: 'delta', content: 'The' }, { type: 'delta', content: ' quick' }]);
  });

  it('maps an upstream that never answers to a timeout, and an abort to aborted', async () => {
    const impatient = createAnthropicAdapter({ id: 'impatient', baseUrl: fake.url, apiKey: 'k', headersTimeoutMs: 100 });
    try {
      await assert.rejects(impatient.complete(requestFor('claude-hang'), context()), failsWith('timeout'));
      await assert.rejects(collect(impatient.stream(requestFor('claude-hang'), context())), failsWith('timeout'));
    } finally {
      await impatient.close();
    }
    await assert.rejects(collect(adapter.stream(requestFor('claude-slow-5000'), context(AbortSignal.timeout(50)))), failsWith('aborted'));
  });

  it('fails a request it cannot write as its own failure (request), and sends nothing', async () => {
    const cyclic: Record<string, unknown> = { type: 'object' };
    cyclic.self = cyclic;
    const tools = [{ type: 'function', function: { name: 'f', parameters: cyclic } }];
    await assert.rejects(adapter.complete(requestFor('claude-ok', { tools }), context()), failsWith('request'));
    assert.equal(fake.requests.length, 0);
  });

  it('keeps one connection across requests, a stream read to message_stop included', async () => {
    const single = createAnthropicAdapter({ id: 'single', baseUrl: fake.url, apiKey: 'k', connections: 1 });
    try {
      for (let i = 0; i < 3; i++) {
        await collect(single.stream(requestFor('claude-ok'), context()));
        await single.complete(requestFor('claude-ok'), context());
      }
    } finally {
      await single.close();
    }
    assert.equal(fake.clientPorts.length, 6);
    assert.equal(new Set(fake.clientPorts).size, 1);
  });
});

describe('the fake Messages API refuses what Anthropic refuses', () => {
  let fake: FakeAnthropic;
  let adapter: AnthropicAdapter;
  before(async () => {
    fake = await startFakeAnthropic(REPLY);
    adapter = createAnthropicAdapter({ id: 'anthropic', baseUrl: fake.url, apiKey: 'k' });
  });
  after(async () => {
    await adapter.close();
    await fake.close();
  });

  it('a conversation starting with the assistant (which the adapter reports as unsupported messages)', async () => {
    const request = requestFor('claude-ok', { messages: [{ role: 'assistant', content: 'Welcome!' }, { role: 'user', content: 'Hi' }] });
    assert.equal(adapter.unsupported(request), 'messages');
    await assert.rejects(adapter.complete(request, context()), failsWith('status', 400));
  });

  it('a whitespace-only stop sequence (which the adapter reports as unsupported stop)', async () => {
    const request = requestFor('claude-ok', { stop: ['\n'] });
    assert.equal(adapter.unsupported(request), 'stop');
    await assert.rejects(adapter.complete(request, context()), failsWith('status', 400));
  });
});
