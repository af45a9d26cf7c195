import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseMessage } from '../../../src/providers/anthropic/response.js';
import { UpstreamError } from '../../../src/providers/types.js';
import { fixture } from './fixtures.js';

describe('anthropic message (JSON answer)', () => {
  it('counts cache writes and reads in the prompt, and the reads as cached', () => {
    assert.deepEqual(parseMessage('anthropic', fixture('cache-usage.json')), {
      content: 'From the cache.',
      finishReason: 'stop',
      usage: { promptTokens: 21 + 188 + 1024, completionTokens: 4, cachedTokens: 1024 },
    });
  });

  it('gives a tool called without arguments "{}"', () => {
    assert.deepEqual(parseMessage('anthropic', fixture('tool-no-args.json')), {
      content: '',
      toolCalls: [{ id: 'toolu_01NoArgsJson', name: 'get_time', arguments: '{}' }],
      finishReason: 'tool_calls',
      usage: { promptTokens: 310, completionTokens: 31 },
    });
  });

  it('joins text blocks, turns tool_use blocks into calls, and leaves thinking out', () => {
    assert.deepEqual(parseMessage('anthropic', fixture('text-then-tool-use.json')), {
      content: 'Checking the weather.',
      toolCalls: [{ id: 'toolu_01Weather', name: 'get_weather', arguments: '{"city":"Paris","unit":"C"}' }],
      finishReason: 'tool_calls',
      usage: { promptTokens: 472, completionTokens: 89 },
    });
  });

  it('fails an error body as its status: overloaded_error as 529', () => {
    assert.throws(() => parseMessage('anthropic', fixture('overloaded-error-body.json')), (error: unknown) => {
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.failure, 'status');
      assert.equal(error.status, 529);
      return true;
    });
  });

  it('fails a message without a stop reason, or a body that is not one, as malformed', () => {
    for (const text of [fixture('message-without-stop-reason.json'), '{"type": "message", "content": [', '[]']) {
      assert.throws(() => parseMessage('anthropic', text), (error: unknown) => error instanceof UpstreamError && error.failure === 'malformed');
    }
  });
});
