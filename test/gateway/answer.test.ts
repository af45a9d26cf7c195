import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Answer } from '../../src/gateway/answer.js';

describe('Answer', () => {
  it('assembles text, tool calls by index, finish and usage', () => {
    const answer = new Answer();
    assert.equal(answer.delivered, false);
    answer.add({ type: 'tool_call', index: 1, id: 'b', name: 'get_time', arguments: '{}' });
    answer.add({ type: 'tool_call', index: 0, id: 'a', name: 'get_weather', arguments: '{"ci' });
    answer.add({ type: 'tool_call', index: 0, arguments: 'ty":"Oslo"}' });
    answer.add({ type: 'delta', content: 'Checking.' });
    answer.add({ type: 'finish', finishReason: 'tool_calls' });
    answer.add({ type: 'usage', usage: { promptTokens: 3, completionTokens: 9 } });
    // Numbered in the order they first appeared.
    assert.deepEqual(answer.toolCalls, [
      { id: 'b', name: 'get_time', arguments: '{}' },
      { id: 'a', name: 'get_weather', arguments: '{"city":"Oslo"}' },
    ]);
    assert.equal(answer.content, 'Checking.');
    assert.equal(answer.finishReason, 'tool_calls');
    assert.deepEqual(answer.usage, { promptTokens: 3, completionTokens: 9 });
    assert.equal(answer.outputText, 'Checking.get_time{}get_weather{"city":"Oslo"}');
    assert.equal(answer.delivered, true);
  });

  it('renumbers tool calls in order of appearance, completes their first piece, and never doubles a name', () => {
    const answer = new Answer();
    assert.deepEqual(answer.add({ type: 'tool_call', index: 4_294_967_294, name: 'f', arguments: '{' }), {
      type: 'tool_call', index: 0, id: answer.toolCalls[0]!.id, name: 'f', arguments: '{',
    });
    assert.match(answer.toolCalls[0]!.id, /^call_[0-9A-Za-z]{24}$/, 'an id made up when the upstream sent none');
    assert.deepEqual(answer.add({ type: 'tool_call', index: 7, id: 'up_7', name: 'g', arguments: '' }), {
      type: 'tool_call', index: 1, id: 'up_7', name: 'g', arguments: '',
    });
    assert.deepEqual(answer.add({ type: 'tool_call', index: 4_294_967_294, name: 'f', arguments: '}' }), { type: 'tool_call', index: 0, arguments: '}' });
    assert.deepEqual(answer.toolCalls.map((c) => [c.name, c.arguments]), [['f', '{}'], ['g', '']]);
    for (let i = 0; i < 200; i++) answer.add({ type: 'tool_call', index: 100 + i, id: `c${i}`, name: 'h', arguments: '' });
    assert.equal(answer.toolCalls.length, 128, 'capped');
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
