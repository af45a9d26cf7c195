import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { GeminiAnswerReader, jsonAnswerEvents, readStreamEvents, toCompletion } from '../../../src/providers/gemini/read-answer.js';
import { UpstreamError, type UpstreamEvent, type UpstreamFailure } from '../../../src/providers/types.js';

const fixture = (name: string): Buffer => readFileSync(new URL(`../../fixtures/gemini/${name}`, import.meta.url));

/** Call ids 1, 2, 3… so that two readings can be compared. */
function counter(): () => string {
  let n = 0;
  return () => `call_test_${++n}`;
}

/** The bytes, cut at the given offsets. */
async function* split(bytes: Uint8Array, ...offsets: number[]): AsyncGenerator<Uint8Array> {
  let start = 0;
  for (const offset of [...offsets, bytes.length]) {
    yield bytes.subarray(start, offset);
    start = offset;
  }
}

async function streamOf(name: string, ...offsets: number[]): Promise<UpstreamEvent[]> {
  const events: UpstreamEvent[] = [];
  for await (const event of readStreamEvents('gemini', split(fixture(name), ...offsets), counter())) events.push(event);
  return events;
}

function failsWith(failure: UpstreamFailure, pattern?: RegExp) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof UpstreamError, `not an UpstreamError: ${String(error)}`);
    assert.equal(error.failure, failure, error.message);
    if (pattern) assert.match(error.message, pattern);
    return true;
  };
}

describe('reading a Gemini stream (byte fixtures)', () => {
  it('function-call-then-stop-in-separate-chunks: the call, then tool_calls (not stop), then usage', async () => {
    assert.deepEqual(await streamOf('function-call-then-stop-in-separate-chunks.sse.txt'), [
      { type: 'tool_call', index: 0, id: 'call_test_1', name: 'get_weather', arguments: '{"city":"Paris","unit":"C"}' },
      { type: 'finish', finishReason: 'tool_calls' },
      { type: 'usage', usage: { promptTokens: 31, completionTokens: 8 } },
    ]);
  });

  it('cumulative-usage: the usage is reported once, after the finish, and the last report wins', async () => {
    const events = await streamOf('cumulative-usage.sse.txt');
    assert.deepEqual(events, [
      { type: 'delta', content: 'The quick' },
      { type: 'delta', content: ' brown fox jumps' },
      { type: 'delta', content: ' over the lazy dog.' },
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 8, completionTokens: 9 } },
    ]);
  });

  it('split-mid-event-multibyte-text-and-call: every split of the bytes gives the same events', async () => {
    const whole = await streamOf('split-mid-event-multibyte-text-and-call.sse.txt');
    assert.deepEqual(whole, [
      { type: 'delta', content: 'Grüße aus Köln 👋' },
      { type: 'delta', content: ' — ich schaue nach: ' },
      { type: 'tool_call', index: 0, id: 'call_test_1', name: 'get_weather', arguments: '{"city":"Köln"}' },
      { type: 'tool_call', index: 1, id: 'call_test_2', name: 'get_time', arguments: '{}' },
      { type: 'finish', finishReason: 'tool_calls' },
      { type: 'usage', usage: { promptTokens: 12, completionTokens: 17 } },
    ]);
    const size = fixture('split-mid-event-multibyte-text-and-call.sse.txt').length;
    for (let offset = 1; offset < size; offset++) {
      assert.deepEqual(await streamOf('split-mid-event-multibyte-text-and-call.sse.txt', offset), whole, `split at byte ${offset}`);
    }
    // And in pieces of one byte each.
    const everyByte = Array.from({ length: size - 1 }, (_, i) => i + 1);
    assert.deepEqual(await streamOf('split-mid-event-multibyte-text-and-call.sse.txt', ...everyByte), whole);
  });

  it('malformed-function-call: a failure of the route (malformed)', async () => {
    await assert.rejects(streamOf('malformed-function-call.sse.txt'), failsWith('malformed', /MALFORMED_FUNCTION_CALL/));
  });

  it('error-object-mid-stream: a failure, after the text that came', async () => {
    const received: UpstreamEvent[] = [];
    await assert.rejects(async () => {
      for await (const event of readStreamEvents('gemini', split(fixture('error-object-mid-stream.sse.txt')))) received.push(event);
    }, failsWith('malformed', /error/));
    assert.deepEqual(received, [{ type: 'delta', content: 'Once upon' }]);
  });

  it('ended-without-finish-reason: a connection failure, "stream ended early"', async () => {
    await assert.rejects(streamOf('ended-without-finish-reason.sse.txt'), failsWith('connection', /stream ended early/));
  });

  it('a data line that is not JSON is malformed', async () => {
    const bytes = new TextEncoder().encode('data: {not json\r\n\r\n');
    await assert.rejects(async () => {
      for await (const _ of readStreamEvents('gemini', split(bytes))) { /* drain */ }
    }, failsWith('malformed'));
  });
});

describe('reading a Gemini JSON answer (fixtures)', () => {
  const completionOf = (name: string) => toCompletion(jsonAnswerEvents('gemini', fixture(name).toString('utf8'), counter()));

  it('cached-content-usage: cached tokens are inside the prompt, not added', () => {
    assert.deepEqual(completionOf('cached-content-usage.json'), {
      content: 'Section 2 covers the refund policy.',
      finishReason: 'stop',
      usage: { promptTokens: 1500, completionTokens: 9, cachedTokens: 1024 },
    });
  });

  it('thoughts-usage: thought parts are not content; thoughts count as completion and as reasoning', () => {
    assert.deepEqual(completionOf('thoughts-usage.json'), {
      content: 'Seven.',
      finishReason: 'stop',
      usage: { promptTokens: 10, completionTokens: 122, reasoningTokens: 120 },
    });
  });

  it('safety-finish-without-content: content_filter, no content, the prompt still counted', () => {
    assert.deepEqual(completionOf('safety-finish-without-content.json'), {
      content: '', finishReason: 'content_filter', usage: { promptTokens: 14, completionTokens: 0 },
    });
  });

  it('prompt-blocked-no-candidates: content_filter with no content', () => {
    assert.deepEqual(completionOf('prompt-blocked-no-candidates.json'), {
      content: '', finishReason: 'content_filter', usage: { promptTokens: 22, completionTokens: 0 },
    });
  });

  it('parallel-calls-in-one-response: one tool call each, own ids, arguments {} when none', () => {
    assert.deepEqual(completionOf('parallel-calls-in-one-response.json'), {
      content: '',
      toolCalls: [
        { id: 'call_test_1', name: 'get_weather', arguments: '{"city":"Tokyo"}' },
        { id: 'call_test_2', name: 'get_weather', arguments: '{"city":"Lima"}' },
        { id: 'call_test_3', name: 'get_time', arguments: '{}' },
      ],
      finishReason: 'tool_calls',
      usage: { promptTokens: 30, completionTokens: 18 },
    });
  });

  it('takes the list that streamGenerateContent answers without alt=sse', () => {
    const list = `[${['{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}', '{"candidates":[{"finishReason":"MAX_TOKENS"}]}'].join(',')}]`;
    assert.deepEqual(jsonAnswerEvents('gemini', list), [
      { type: 'delta', content: 'Hi' },
      { type: 'finish', finishReason: 'length' },
    ]);
  });

  it('an answer without a finish reason, without candidates, or not JSON is malformed', () => {
    assert.throws(() => jsonAnswerEvents('gemini', '{"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}'), failsWith('malformed', /finish/));
    assert.throws(() => jsonAnswerEvents('gemini', '{"usageMetadata":{"promptTokenCount":3}}'), failsWith('malformed'));
    assert.throws(() => jsonAnswerEvents('gemini', '{"candidates": ['), failsWith('malformed'));
    assert.throws(() => jsonAnswerEvents('gemini', '{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]},"finishReason":"STOP"}]}'), failsWith('malformed'));
  });
});

describe('GeminiAnswerReader', () => {
  const chunk = (candidate: Record<string, unknown>) => ({ candidates: [candidate] });

  it('uses the id Gemini gives a call, and numbers calls across chunks', () => {
    const reader = new GeminiAnswerReader('gemini', counter());
    const call = (name: string, id?: string) => ({ content: { parts: [{ functionCall: { name, ...(id && { id }) } }] } });
    assert.deepEqual(reader.push(chunk(call('a', 'fc_1')), ''), [{ type: 'tool_call', index: 0, id: 'fc_1', name: 'a', arguments: '{}' }]);
    assert.deepEqual(reader.push(chunk(call('b')), ''), [{ type: 'tool_call', index: 1, id: 'call_test_1', name: 'b', arguments: '{}' }]);
  });

  it('makes fresh call_ ids when Gemini gives none', () => {
    const reader = new GeminiAnswerReader('gemini');
    const events = reader.push(chunk({ content: { parts: [{ functionCall: { name: 'a' } }, { functionCall: { name: 'a' } }] } }), '');
    const ids = events.map((event) => (event.type === 'tool_call' ? event.id : undefined));
    assert.ok(ids.every((id) => typeof id === 'string' && /^call_[0-9A-Za-z]{24}$/.test(id)), String(ids));
    assert.notEqual(ids[0], ids[1]);
  });

  it('ignores content after the finish but keeps the later usage', () => {
    const reader = new GeminiAnswerReader('gemini');
    assert.deepEqual(reader.push(chunk({ content: { parts: [{ text: 'Hi' }] }, finishReason: 'STOP' }), ''), [
      { type: 'delta', content: 'Hi' },
      { type: 'finish', finishReason: 'stop' },
    ]);
    assert.deepEqual(reader.push({ ...chunk({ content: { parts: [{ text: 'late' }] } }), usageMetadata: { promptTokenCount: 2, candidatesTokenCount: 1 } }, ''), []);
    assert.deepEqual(reader.end(), [{ type: 'usage', usage: { promptTokens: 2, completionTokens: 1 } }]);
  });

  it('OTHER after some text is stop; OTHER with nothing delivered is a failure', () => {
    const some = new GeminiAnswerReader('gemini');
    assert.deepEqual(some.push(chunk({ content: { parts: [{ text: 'Hi' }] }, finishReason: 'OTHER' }), '').at(-1), { type: 'finish', finishReason: 'stop' });
    const none = new GeminiAnswerReader('gemini');
    assert.throws(() => none.push(chunk({ finishReason: 'OTHER' }), ''), failsWith('malformed', /OTHER/));
  });
});
