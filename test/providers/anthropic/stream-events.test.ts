import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Answer } from '../../../src/gateway/answer.js';
import { LeadingWhitespace } from '../../../src/providers/anthropic/continuation.js';
import { UpstreamError, type UpstreamEvent } from '../../../src/providers/types.js';
import { bytesSplitAt, eventsOf, fixture } from './fixtures.js';

async function read(name: string, leading?: LeadingWhitespace): Promise<UpstreamEvent[]> {
  const { events, error } = await eventsOf(bytesSplitAt(fixture(name)), leading);
  if (error) throw error;
  return events;
}

async function failure(name: string): Promise<{ events: UpstreamEvent[]; error: UpstreamError }> {
  const { events, error } = await eventsOf(bytesSplitAt(fixture(name)));
  assert.ok(error instanceof UpstreamError, `expected an UpstreamError, got ${String(error)}`);
  return { events, error };
}

describe('anthropic stream events', () => {
  it('turns text deltas into deltas, then the finish, then usage; pings are skipped', async () => {
    assert.deepEqual(await read('text-with-ping.sse.txt'), [
      { type: 'delta', content: 'Hello' },
      { type: 'delta', content: '!' },
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 25, completionTokens: 15, cachedTokens: 0 } },
    ]);
  });

  it('gives a tool called without arguments "{}", never ""', async () => {
    const events = await read('tool-no-args.sse.txt');
    assert.deepEqual(events, [
      { type: 'tool_call', index: 0, id: 'toolu_01NoArgs', name: 'get_time', arguments: '' },
      { type: 'tool_call', index: 0, arguments: '{}' },
      { type: 'finish', finishReason: 'tool_calls' },
      { type: 'usage', usage: { promptTokens: 310, completionTokens: 31 } },
    ]);
    const answer = new Answer();
    for (const event of events) answer.add(event);
    assert.deepEqual(answer.toolCalls, [{ id: 'toolu_01NoArgs', name: 'get_time', arguments: '{}' }]);
  });

  it('gives "{}" to a call without arguments whose block never stopped, when the message stops', async () => {
    const answer = new Answer();
    for (const event of await read('tool-block-never-stopped.sse.txt')) answer.add(event);
    assert.deepEqual(answer.toolCalls, [{ id: 'toolu_01Unstopped', name: 'get_time', arguments: '{}' }]);
    assert.equal(answer.finishReason, 'tool_calls');
  });

  it('numbers tool calls among themselves (not by content block) and streams input_json_delta as argument pieces', async () => {
    assert.deepEqual(await read('text-then-two-tool-uses.sse.txt'), [
      { type: 'delta', content: 'Checking both.' },
      { type: 'tool_call', index: 0, id: 'toolu_01Paris', name: 'get_weather', arguments: '' },
      { type: 'tool_call', index: 0, arguments: '{"city": "Pa' },
      { type: 'tool_call', index: 0, arguments: 'ris"}' },
      { type: 'tool_call', index: 1, id: 'toolu_01Oslo', name: 'get_weather', arguments: '' },
      { type: 'tool_call', index: 1, arguments: '{"city": "Oslo"}' },
      { type: 'finish', finishReason: 'tool_calls' },
      { type: 'usage', usage: { promptTokens: 472, completionTokens: 89 } },
    ]);
  });

  it('takes the last cumulative usage report, never the sum; one finish', async () => {
    assert.deepEqual(await read('cumulative-usage.sse.txt'), [
      { type: 'delta', content: 'One two' },
      { type: 'finish', finishReason: 'length' },
      { type: 'usage', usage: { promptTokens: 40, completionTokens: 12 } },
    ]);
  });

  it('counts cache writes and reads in the prompt, and the reads as cached', async () => {
    const events = await read('cache-usage.sse.txt');
    assert.deepEqual(events.at(-1), { type: 'usage', usage: { promptTokens: 21 + 188 + 1024, completionTokens: 3, cachedTokens: 1024 } });
  });

  it('skips thinking blocks, server tool blocks and events it does not know', async () => {
    assert.deepEqual(await read('thinking-and-unknown-events.sse.txt'), [
      { type: 'delta', content: 'Sunny.' },
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 30, completionTokens: 40 } },
    ]);
  });

  it('reads a duplicated message_start once', async () => {
    assert.deepEqual(await read('duplicate-message-start.sse.txt'), [
      { type: 'delta', content: 'Once.' },
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 9, completionTokens: 2 } },
    ]);
  });

  it('ends the answer at message_stop, whatever follows', async () => {
    assert.deepEqual(await read('message-stop-then-more.sse.txt'), [
      { type: 'delta', content: 'Done.' },
      { type: 'finish', finishReason: 'stop' },
      { type: 'usage', usage: { promptTokens: 4, completionTokens: 2 } },
    ]);
  });

  it('fails an overloaded_error event before any content as a 529', async () => {
    const { events, error } = await failure('overloaded-error-before-content.sse.txt');
    assert.deepEqual(events, []);
    assert.equal(error.failure, 'status');
    assert.equal(error.status, 529);
  });

  it('fails an overloaded_error event after content as a 529, after the deltas that came', async () => {
    const { events, error } = await failure('overloaded-error-mid-stream.sse.txt');
    assert.deepEqual(events, [{ type: 'delta', content: 'Once' }, { type: 'delta', content: ' upon' }]);
    assert.equal(error.failure, 'status');
    assert.equal(error.status, 529);
  });

  it('fails other error events as their documented status, and an unknown error type as malformed', async () => {
    const api = await failure('api-error-mid-stream.sse.txt');
    assert.equal(api.error.failure, 'status');
    assert.equal(api.error.status, 500);
    const unknown = await failure('unknown-error-type.sse.txt');
    assert.equal(unknown.error.failure, 'malformed');
  });

  it('fails a stream that ends without message_stop as a connection failure', async () => {
    const { events, error } = await failure('ended-without-message-stop.sse.txt');
    assert.deepEqual(events, [{ type: 'delta', content: 'Half' }]);
    assert.equal(error.failure, 'connection');
    assert.match(error.message, /stream ended early/);
  });

  it('fails data that is not JSON as malformed', async () => {
    const { error } = await failure('malformed-data.sse.txt');
    assert.equal(error.failure, 'malformed');
  });

  it('gives identical events however the bytes are split: at every offset, and byte by byte', async () => {
    for (const name of ['split-mid-event-multibyte-and-tool.sse.txt', 'text-then-two-tool-uses.sse.txt']) {
      const text = fixture(name);
      const whole = await read(name);
      assert.ok(whole.length > 4);
      const size = new TextEncoder().encode(text).length;
      for (let offset = 1; offset < size; offset++) {
        const { events, error } = await eventsOf(bytesSplitAt(text, offset));
        assert.equal(error, null, `split at ${offset}`);
        assert.deepEqual(events, whole, `split at ${offset}`);
      }
      const every = Array.from({ length: size - 1 }, (_, i) => i + 1);
      assert.deepEqual((await eventsOf(bytesSplitAt(text, ...every))).events, whole);
    }
  });

  it('reads the multi-byte text and arguments whole', async () => {
    const answer = new Answer();
    for (const event of await read('split-mid-event-multibyte-and-tool.sse.txt')) answer.add(event);
    assert.equal(answer.content, 'Grüße 👋 — café');
    assert.deepEqual(answer.toolCalls, [{ id: 'toolu_01Split', name: 'lookup', arguments: '{"q": "crème brûlée"}' }]);
    assert.deepEqual(answer.usage, { promptTokens: 22, completionTokens: 24, cachedTokens: 5 });
  });

  it('drops the whitespace cut from a continued turn from the start of the continuation, across deltas', async () => {
    const events = await read('continuation-leading-whitespace.sse.txt', new LeadingWhitespace(2));
    assert.deepEqual(events.slice(0, 2), [{ type: 'delta', content: 'upon a  time' }, { type: 'finish', finishReason: 'stop' }]);
    const untouched = await read('continuation-leading-whitespace.sse.txt');
    assert.deepEqual(untouched.slice(0, 2), [{ type: 'delta', content: ' ' }, { type: 'delta', content: ' upon a  time' }]);
  });
});
