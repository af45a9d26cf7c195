import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { createSimulatorAdapter } from '../../src/providers/simulator.js';
import { DEFAULT_ROUTE_PARAMS, UpstreamError, type AttemptContext, type UpstreamEvent, type UpstreamRequest } from '../../src/providers/types.js';

function requestFor(content: string, overrides: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return {
    model: 'sim-small',
    messages: [
      { role: 'system', content: 'You are terse.' },
      { role: 'user', content },
    ],
    maxTokens: 1000,
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

describe('simulator adapter', () => {
  const simulator = createSimulatorAdapter();

  it('has the given id', () => {
    assert.equal(simulator.id, 'simulator');
    assert.equal(createSimulatorAdapter('sim-eu').id, 'sim-eu');
  });

  it('answers the same request the same way, another one otherwise', async () => {
    const first = await simulator.complete(requestFor('Tell me about credits.'), context());
    const again = await simulator.complete(requestFor('Tell me about credits.'), context());
    const other = await simulator.complete(requestFor('Tell me about keys.'), context());
    const otherModel = await simulator.complete(requestFor('Tell me about credits.', { model: 'sim-large' }), context());
    assert.deepEqual(again, first);
    assert.notEqual(other.content, first.content);
    assert.notEqual(otherModel.content, first.content);
  });

  it('replies with 20 to 120 tokens and stops on its own', async () => {
    for (let i = 0; i < 20; i++) {
      const completion = await simulator.complete(requestFor(`question ${i}`), context());
      assert.equal(completion.finishReason, 'stop');
      const tokens = countTextTokens(completion.content);
      assert.ok(tokens >= 20 && tokens <= 140, `${tokens} tokens`);
    }
  });

  it('honours maxTokens with finish reason length', async () => {
    const full = await simulator.complete(requestFor('Long story please.'), context());
    const cut = await simulator.complete(requestFor('Long story please.', { maxTokens: 7 }), context());
    assert.equal(cut.finishReason, 'length');
    assert.equal(countTextTokens(cut.content), 7);
    assert.ok(full.content.startsWith(cut.content));
  });

  it('reports usage counted as the gateway counts', async () => {
    const request = requestFor('How many tokens is this?', { maxTokens: 12 });
    request.messages.push({ role: 'assistant', content: 'Some.', name: 'helper' });
    const completion = await simulator.complete(request, context());
    assert.deepEqual(completion.usage, {
      promptTokens: countPromptTokens(request.messages),
      completionTokens: countTextTokens(completion.content),
    });
  });

  it('calls onFirstByte once in complete', async () => {
    const ctx = context();
    await simulator.complete(requestFor('hi'), ctx);
    assert.equal(ctx.firstBytes, 1);
  });

  it('streams pieces that join into what complete returns, then finish, then usage', async () => {
    for (const maxTokens of [1000, 9]) {
      const request = requestFor('Stream this.', { maxTokens });
      const completion = await simulator.complete(request, context());
      const events = await collect(simulator.stream(request, context()));
      const deltas = events.filter((event) => event.type === 'delta');
      assert.ok(deltas.length > 1);
      assert.equal(deltas.map((event) => event.content).join(''), completion.content);
      assert.deepEqual(events.slice(deltas.length), [
        { type: 'finish', finishReason: completion.finishReason },
        { type: 'usage', usage: completion.usage },
      ]);
    }
  });

  it('stops with an aborted error when the signal aborts', async () => {
    const controller = new AbortController();
    const received: UpstreamEvent[] = [];
    await assert.rejects(
      async () => {
        for await (const event of simulator.stream(requestFor('Abort me.'), context(controller.signal))) {
          received.push(event);
          controller.abort();
        }
      },
      (error) => error instanceof UpstreamError && error.failure === 'aborted' && !error.retryable,
    );
    assert.equal(received.length, 1);
    await assert.rejects(
      simulator.complete(requestFor('Too late.'), context(controller.signal)),
      (error) => error instanceof UpstreamError && error.failure === 'aborted',
    );
  });
});

describe('token counting', () => {
  it('counts text tokens, special-token look-alikes as plain text', () => {
    assert.equal(countTextTokens(''), 0);
    assert.equal(countTextTokens('hello'), 1);
    assert.ok(countTextTokens('a <|endoftext|> b') > 3);
  });

  it('counts a chat as OpenAI does: 3 per message, its fields, 1 per name, 3 for the reply', () => {
    assert.equal(countPromptTokens([]), 3);
    assert.equal(countPromptTokens([{ role: 'user', content: 'hello' }]), 3 + 1 + 1 + 3);
    assert.equal(countPromptTokens([{ role: 'user', content: 'hello', name: 'bob' }]), 3 + 1 + 1 + 1 + 1 + 3);
  });
});
