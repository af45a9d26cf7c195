import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createGeminiAdapter, geminiUrl, type GeminiAdapter } from '../../src/providers/gemini.js';
import {
  DEFAULT_ROUTE_PARAMS,
  UpstreamError,
  type AttemptContext,
  type UpstreamEvent,
  type UpstreamFailure,
  type UpstreamRequest,
} from '../../src/providers/types.js';
import {
  FAKE_CACHED_TOKENS, FAKE_THOUGHT_TEXT, FAKE_THOUGHT_TOKENS, FAKE_TOOL_ARGS, startFakeGemini, type FakeGemini,
} from '../support/fake-gemini.js';

const REPLY = 'The quick brown fox jumps over the lazy dog.';
const KEY = 'AIza-test-key';
const words = (text: string) => text.split(/\s+/).filter((word) => word !== '').length;
const promptWords = words('Be brief.') + words('Tell me a short story please');

const weatherTool = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
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

describe('gemini adapter against the fake Gemini upstream', () => {
  let upstream: FakeGemini;
  let adapter: GeminiAdapter;

  before(async () => {
    upstream = await startFakeGemini(REPLY);
    adapter = createGeminiAdapter({ id: 'gemini', baseUrl: `${upstream.url}/`, apiKey: KEY, headersTimeoutMs: 2000 });
  });
  after(async () => {
    await adapter.close();
    await upstream.close();
  });
  beforeEach(() => {
    upstream.requests.length = 0;
  });

  it('completes with generateContent: the reply, finish and usage; the key in the header, never in the URL', async () => {
    const ctx = context();
    const completion = await adapter.complete(requestFor('gemini-ok'), ctx);
    assert.deepEqual(completion, { content: REPLY, finishReason: 'stop', usage: { promptTokens: promptWords, completionTokens: words(REPLY) } });
    assert.equal(ctx.firstBytes, 1);
    const [received] = upstream.requests;
    assert.equal(received?.url, '/v1beta/models/gemini-ok:generateContent');
    assert.equal(received?.headers['x-goog-api-key'], KEY);
    assert.equal(received?.headers.authorization, undefined);
  });

  it('streams with streamGenerateContent?alt=sse: deltas that join into the reply, then finish, then the last usage', async () => {
    const events = await collect(adapter.stream(requestFor('gemini-ok'), context()));
    const deltas = events.filter((event) => event.type === 'delta');
    assert.equal(deltas.map((event) => event.content).join(''), REPLY);
    assert.equal(deltas.length, words(REPLY));
    assert.deepEqual(events.slice(deltas.length), [
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: promptWords, completionTokens: words(REPLY) } },
    ]);
    const [received] = upstream.requests;
    assert.equal(received?.url, '/v1beta/models/gemini-ok:streamGenerateContent?alt=sse');
    assert.equal(received?.headers['x-goog-api-key'], KEY);
    assert.ok(!received?.url?.includes('key='));
  });

  it('keeps the base URL\'s own query, and the fake refuses a key in the URL', async () => {
    assert.equal(geminiUrl('https://g.example/?trace=1', 'gemini-2.5-flash', true).href,
      'https://g.example/v1beta/models/gemini-2.5-flash:streamGenerateContent?trace=1&alt=sse');
    assert.equal(geminiUrl('https://g.example//', 'models/gemini-2.5-flash', false).href,
      'https://g.example/v1beta/models/gemini-2.5-flash:generateContent');
    const traced = createGeminiAdapter({ id: 'traced', baseUrl: `${upstream.url}?trace=1`, apiKey: KEY });
    const leaky = createGeminiAdapter({ id: 'leaky', baseUrl: `${upstream.url}?key=${KEY}`, apiKey: KEY });
    try {
      await traced.complete(requestFor('gemini-ok'), context());
      assert.equal(upstream.requests[0]?.url, '/v1beta/models/gemini-ok:generateContent?trace=1');
      // Only a base URL that itself carries `key=` puts it there; the fake answers that with a 400.
      await assert.rejects(leaky.complete(requestFor('gemini-ok'), context()), failsWith('status', 400));
    } finally {
      await traced.close();
      await leaky.close();
    }
  });

  it('sends no key without one (Gemini then answers 403)', async () => {
    const keyless = createGeminiAdapter({ id: 'keyless', baseUrl: upstream.url });
    try {
      await assert.rejects(keyless.complete(requestFor('gemini-ok'), context()), failsWith('status', 403));
      assert.equal(upstream.requests[0]?.headers['x-goog-api-key'], undefined);
    } finally {
      await keyless.close();
    }
  });

  it('sends the request in Gemini\'s words: systemInstruction, merged user/model turns, generationConfig, tools, toolConfig', async () => {
    const schema = { type: 'object', properties: { story: { type: 'string' } }, required: ['story'], additionalProperties: false };
    const request = requestFor('gemini-ok', {
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Tell me' },
        { role: 'user', content: 'a short story please' },
        { role: 'assistant', content: 'Which kind?' },
        { role: 'system', content: 'Stay kind.' },
        { role: 'user', content: 'Any.' },
      ],
      temperature: 1.5, topP: 0.9, callerSet: { temperature: true, topP: true },
      stop: ['THE END'], seed: 42, presencePenalty: 0.25, frequencyPenalty: 0.5, user: 'u-1',
      responseFormat: { type: 'json_schema', json_schema: { name: 'story', strict: true, schema } },
      tools: [weatherTool], toolChoice: { type: 'function', function: { name: 'get_weather' } }, parallelToolCalls: true,
    });
    await adapter.complete(request, context());
    assert.deepEqual(upstream.requests[0]?.body, {
      systemInstruction: { parts: [{ text: 'Be brief.' }, { text: 'Stay kind.' }] },
      contents: [
        { role: 'user', parts: [{ text: 'Tell me' }, { text: 'a short story please' }] },
        { role: 'model', parts: [{ text: 'Which kind?' }] },
        { role: 'user', parts: [{ text: 'Any.' }] },
      ],
      generationConfig: {
        maxOutputTokens: 100, temperature: 1.5, topP: 0.9, stopSequences: ['THE END'], seed: 42, presencePenalty: 0.25, frequencyPenalty: 0.5,
        responseMimeType: 'application/json', responseJsonSchema: schema,
      },
      tools: [{ functionDeclarations: [{ name: 'get_weather', description: 'Weather in a city', parametersJsonSchema: weatherTool.function.parameters }] }],
      toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] } },
    });
  });

  it('leaves out the fields the route refuses', async () => {
    const params = { ...DEFAULT_ROUTE_PARAMS, refuses: ['temperature', 'top_p'] };
    await adapter.complete(requestFor('gemini-ok', { params, responseFormat: { type: 'json_object' } }), context());
    assert.deepEqual(upstream.requests[0]?.body.generationConfig, { maxOutputTokens: 100, responseMimeType: 'application/json' });
  });

  it('maps MAX_TOKENS to length, in both modes', async () => {
    const completion = await adapter.complete(requestFor('gemini-ok', { maxTokens: 3 }), context());
    assert.deepEqual(completion, { content: 'The quick brown', finishReason: 'length', usage: { promptTokens: promptWords, completionTokens: 3 } });
    assert.deepEqual(await collect(adapter.stream(requestFor('gemini-ok', { maxTokens: 2 }), context())), [
      { type: 'delta', content: 'The' },
      { type: 'delta', content: ' quick' },
      { type: 'finish', finishReason: 'length' },
      { type: 'usage', usage: { promptTokens: promptWords, completionTokens: 2 } },
    ]);
  });

  it('streams a function call as a tool call with an id; STOP in a later chunk finishes as tool_calls', async () => {
    const events = await collect(adapter.stream(requestFor('gemini-tools', { tools: [weatherTool] }), context()));
    assert.equal(events.length, 3);
    const [call, finish, usage] = events;
    assert.ok(call?.type === 'tool_call' && typeof call.id === 'string' && call.id.startsWith('call_'));
    assert.deepEqual(call, { type: 'tool_call', index: 0, id: call.id, name: 'get_weather', arguments: JSON.stringify(FAKE_TOOL_ARGS) });
    assert.deepEqual(finish, { type: 'finish', finishReason: 'tool_calls' });
    assert.equal(usage?.type, 'usage');
  });

  it('round-trips a tool call: the follow-up turn sends functionCall and functionResponse parts with the right name', async () => {
    const first = await adapter.complete(requestFor('gemini-tools', { tools: [weatherTool] }), context());
    assert.equal(first.finishReason, 'tool_calls');
    const [call] = first.toolCalls ?? [];
    assert.ok(call);
    assert.deepEqual({ name: call.name, arguments: call.arguments }, { name: 'get_weather', arguments: JSON.stringify(FAKE_TOOL_ARGS) });

    const followUp = requestFor('gemini-tools', {
      tools: [weatherTool],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: '', toolCalls: first.toolCalls },
        { role: 'tool', toolCallId: call.id, content: '{"temp": 21}' },
      ],
    });
    const second = await adapter.complete(followUp, context());
    assert.deepEqual({ content: second.content, finishReason: second.finishReason }, { content: REPLY, finishReason: 'stop' });
    assert.deepEqual(upstream.requests[1]?.body.contents, [
      { role: 'user', parts: [{ text: 'Weather in Paris?' }] },
      { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: FAKE_TOOL_ARGS }, thoughtSignature: 'skip_thought_signature_validator' }] },
      { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { temp: 21 } } }] },
    ]);
    // The same turn streamed.
    const streamed = await collect(adapter.stream(followUp, context()));
    assert.equal(streamed.filter((event) => event.type === 'delta').map((event) => event.content).join(''), REPLY);
  });

  it('fails a tool result whose call it cannot name as its own failure (request), and sends nothing', async () => {
    const request = requestFor('gemini-ok', { messages: [{ role: 'user', content: 'x' }, { role: 'tool', toolCallId: 'call_unknown', content: '1' }] });
    await assert.rejects(adapter.complete(request, context()), failsWith('request'));
    await assert.rejects(collect(adapter.stream(request, context())), failsWith('request'));
    assert.equal(upstream.requests.length, 0);
  });

  it('maps SAFETY to content_filter, after what streamed before it', async () => {
    const completion = await adapter.complete(requestFor('gemini-safety'), context());
    assert.equal(completion.finishReason, 'content_filter');
    const events = await collect(adapter.stream(requestFor('gemini-safety'), context()));
    assert.deepEqual(events.slice(0, 2), [{ type: 'delta', content: 'The' }, { type: 'finish', finishReason: 'content_filter' }]);
  });

  it('maps a blocked prompt to content_filter with no content', async () => {
    assert.deepEqual(await adapter.complete(requestFor('gemini-blocked'), context()), {
      content: '', finishReason: 'content_filter', usage: { promptTokens: promptWords, completionTokens: 0 },
    });
    assert.deepEqual(await collect(adapter.stream(requestFor('gemini-blocked'), context())), [
      { type: 'finish', finishReason: 'content_filter' },
      { type: 'usage', usage: { promptTokens: promptWords, completionTokens: 0 } },
    ]);
  });

  it('maps MALFORMED_FUNCTION_CALL to a failure of the route, in both modes', async () => {
    const request = requestFor('gemini-malformed-call', { tools: [weatherTool] });
    await assert.rejects(adapter.complete(request, context()), failsWith('malformed'));
    await assert.rejects(collect(adapter.stream(request, context())), failsWith('malformed'));
  });

  it('leaves thought parts out of the answer and counts thoughts as completion and reasoning tokens', async () => {
    const expected = { promptTokens: promptWords, completionTokens: words(REPLY) + FAKE_THOUGHT_TOKENS, reasoningTokens: FAKE_THOUGHT_TOKENS };
    const completion = await adapter.complete(requestFor('gemini-thoughts'), context());
    assert.deepEqual(completion, { content: REPLY, finishReason: 'stop', usage: expected });
    const events = await collect(adapter.stream(requestFor('gemini-thoughts'), context()));
    assert.ok(!events.some((event) => event.type === 'delta' && event.content.includes(FAKE_THOUGHT_TEXT)));
    assert.deepEqual(events.at(-1), { type: 'usage', usage: expected });
  });

  it('reports cached prompt tokens inside the prompt', async () => {
    const events = await collect(adapter.stream(requestFor('gemini-cache'), context()));
    assert.deepEqual(events.at(-1), {
      type: 'usage', usage: { promptTokens: promptWords, completionTokens: words(REPLY), cachedTokens: Math.min(promptWords, FAKE_CACHED_TOKENS) },
    });
  });

  for (const [model, status] of [['gemini-error-500', 500], ['gemini-error-429', 429], ['gemini-error-400', 400]] as const) {
    it(`maps ${status} to a status failure, in both modes`, async () => {
      await assert.rejects(adapter.complete(requestFor(model), context()), failsWith('status', status));
      await assert.rejects(collect(adapter.stream(requestFor(model), context())), failsWith('status', status));
    });
  }

  it('maps a body that is not JSON, or an event that is not, to malformed', async () => {
    await assert.rejects(adapter.complete(requestFor('gemini-malformed'), context()), failsWith('malformed'));
    await assert.rejects(collect(adapter.stream(requestFor('gemini-malformed'), context())), failsWith('malformed'));
  });

  it('maps a reset socket to a connection failure', async () => {
    await assert.rejects(adapter.complete(requestFor('gemini-reset'), context()), failsWith('connection'));
    await assert.rejects(collect(adapter.stream(requestFor('gemini-reset'), context())), failsWith('connection'));
  });

  it('maps a body cut short to a connection failure, after the deltas that came', async () => {
    await assert.rejects(adapter.complete(requestFor('gemini-cut'), context()), failsWith('connection'));
    const received: UpstreamEvent[] = [];
    await assert.rejects(async () => {
      for await (const event of adapter.stream(requestFor('gemini-cut'), context())) received.push(event);
    }, failsWith('connection'));
    assert.deepEqual(received, [{ type: 'delta', content: 'The' }, { type: 'delta', content: ' quick' }]);
  });

  it('maps an upstream that never answers to a timeout, and waits for a slow one', async () => {
    const impatient = createGeminiAdapter({ id: 'impatient', baseUrl: upstream.url, apiKey: KEY, headersTimeoutMs: 100 });
    try {
      await assert.rejects(impatient.complete(requestFor('gemini-hang'), context()), failsWith('timeout'));
      await assert.rejects(collect(impatient.stream(requestFor('gemini-hang'), context())), failsWith('timeout'));
    } finally {
      await impatient.close();
    }
    assert.equal((await adapter.complete(requestFor('gemini-slow-50'), context())).content, REPLY);
  });

  it('maps an aborted signal to aborted, before and during the stream', async () => {
    const waiting = new AbortController();
    const pending = adapter.complete(requestFor('gemini-hang'), context(waiting.signal));
    setTimeout(() => waiting.abort(), 20);
    await assert.rejects(pending, (error) => failsWith('aborted')(error) && !(error as UpstreamError).retryable);

    const streaming = new AbortController();
    const received: UpstreamEvent[] = [];
    const started = Date.now();
    await assert.rejects(async () => {
      for await (const event of adapter.stream(requestFor('gemini-stall-5000'), context(streaming.signal))) {
        received.push(event);
        streaming.abort();
      }
    }, failsWith('aborted'));
    assert.deepEqual(received, [{ type: 'delta', content: 'The' }]);
    assert.ok(Date.now() - started < 2000);
  });

  it('releases the upstream when the consumer stops early', async () => {
    const own = createGeminiAdapter({ id: 'own', baseUrl: upstream.url, apiKey: KEY });
    for await (const event of own.stream(requestFor('gemini-stall-5000'), context())) {
      assert.deepEqual(event, { type: 'delta', content: 'The' });
      break;
    }
    const started = Date.now();
    await own.close();
    assert.ok(Date.now() - started < 1000);
  });

  it('keeps one connection across streams and completions', async () => {
    const pooled = createGeminiAdapter({ id: 'pooled', baseUrl: upstream.url, apiKey: KEY, connections: 1 });
    const before = upstream.connections();
    try {
      for (let i = 0; i < 3; i++) {
        await collect(pooled.stream(requestFor('gemini-ok'), context()));
        await pooled.complete(requestFor('gemini-ok'), context());
      }
    } finally {
      await pooled.close();
    }
    assert.equal(upstream.connections() - before, 1);
  });
});

describe('gemini adapter: what it refuses', () => {
  const adapter = createGeminiAdapter({ id: 'gemini', baseUrl: 'http://127.0.0.1:9' });
  after(() => adapter.close());

  it('honours text, JSON output, function tools and tool choices; never continues a cut answer', () => {
    assert.equal(adapter.unsupported(requestFor('m')), null);
    assert.equal(adapter.unsupported(requestFor('m', { responseFormat: { type: 'json_object' }, tools: [weatherTool], toolChoice: 'required', parallelToolCalls: true, seed: 1, stop: ['x'], user: 'u' })), null);
    assert.equal(adapter.continues({ ...DEFAULT_ROUTE_PARAMS, continue: true }), false);
  });

  it('refuses what Gemini cannot honour, by its OpenAI wire name', () => {
    assert.equal(adapter.unsupported(requestFor('m', { parallelToolCalls: false })), 'parallel_tool_calls');
    assert.equal(adapter.unsupported(requestFor('m', { responseFormat: { type: 'json_schema' } })), 'response_format');
    assert.equal(adapter.unsupported(requestFor('m', { tools: [{ type: 'web_search' }] })), 'tools');
    assert.equal(adapter.unsupported(requestFor('m', { tools: [weatherTool], toolChoice: 'any' })), 'tool_choice');
  });
});

describe('gemini adapter without an upstream', () => {
  it('maps a refused connection to a connection failure', async () => {
    const upstream = await startFakeGemini(REPLY);
    await upstream.close();
    const adapter = createGeminiAdapter({ id: 'gone', baseUrl: upstream.url, apiKey: KEY });
    try {
      await assert.rejects(adapter.complete(requestFor('gemini-ok'), context()), failsWith('connection'));
      await assert.rejects(collect(adapter.stream(requestFor('gemini-ok'), context())), failsWith('connection'));
    } finally {
      await adapter.close();
    }
  });
});
