import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Answer } from '../../src/gateway/answer.js';

describe('Answer', () => {
  it('assembles text, tool calls by index, finish and usage', () => {
    const answer = new Answer();
    assert.equal(answer.delivered, false);
    answer.add({ type: 'tool_call', index: 1, id: 'b', name: 'get_time', arguments: '{}' });
    answer.add({ type: 'tool_call', index: 0, id: 'a', name: 'get_', arguments: '{"ci' });
    answer.add({ type: 'tool_call', index: 0, name: 'weather', arguments: 'ty":"Oslo"}' });
    answer.add({ type: 'delta', content: 'Checking.' });
    answer.add({ type: 'finish', finishReason: 'tool_calls' });
    answer.add({ type: 'usage', usage: { promptTokens: 3, completionTokens: 9 } });
    assert.deepEqual(answer.toolCalls, [
      { id: 'a', name: 'get_weather', arguments: '{"city":"Oslo"}' },
      { id: 'b', name: 'get_time', arguments: '{}' },
    ]);
    assert.equal(answer.content, 'Checking.');
    assert.equal(answer.finishReason, 'tool_calls');
    assert.deepEqual(answer.usage, { promptTokens: 3, completionTokens: 9 });
    assert.equal(answer.outputText, 'Checking.get_weather{"city":"Oslo"}get_time{}');
    assert.equal(answer.delivered, true);
  });

  it('counts as delivered once anything could have reached a client', () => {
    const usageOnly = new Answer();
    usageOnly.add({ type: 'usage', usage: { promptTokens: 1, completionTokens: 0 } });
    assert.equal(usageOnly.delivered, false);
    const finished = new Answer();
    finished.add({ type: 'finish', finishReason: 'stop' });
    assert.equal(finished.delivered, true);
  });
});
