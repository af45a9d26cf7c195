import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SKIP_THOUGHT_SIGNATURE, toFunctionResponse, toGeminiPrompt } from '../../../src/providers/gemini/convert-contents.js';
import { UpstreamError, type ChatMessage } from '../../../src/providers/types.js';

const isRequestFailure = (pattern: RegExp) => (error: unknown): boolean => {
  assert.ok(error instanceof UpstreamError);
  assert.equal(error.failure, 'request');
  assert.match(error.message, pattern);
  return true;
};

describe('toGeminiPrompt', () => {
  it('gathers every system message, in order, into systemInstruction; assistant is model', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
      { role: 'system', content: 'Answer in French.' },
      { role: 'assistant', content: 'Bonjour' },
      { role: 'user', content: 'Again' },
    ];
    assert.deepEqual(toGeminiPrompt(messages), {
      systemInstruction: { parts: [{ text: 'Be brief.' }, { text: 'Answer in French.' }] },
      contents: [
        { role: 'user', parts: [{ text: 'Hi' }] },
        { role: 'model', parts: [{ text: 'Bonjour' }] },
        { role: 'user', parts: [{ text: 'Again' }] },
      ],
    });
  });

  it('merges consecutive turns of one role and leaves out empty texts', () => {
    const { systemInstruction, contents } = toGeminiPrompt([
      { role: 'system', content: '' },
      { role: 'user', content: 'One' },
      { role: 'user', content: '' },
      { role: 'user', content: 'Two' },
      { role: 'assistant', content: 'A' },
      { role: 'assistant', content: 'B' },
    ]);
    assert.equal(systemInstruction, undefined);
    assert.deepEqual(contents, [
      { role: 'user', parts: [{ text: 'One' }, { text: 'Two' }] },
      { role: 'model', parts: [{ text: 'A' }, { text: 'B' }] },
    ]);
  });

  it('sends tool calls back as functionCall parts and results as functionResponse parts named after their call', () => {
    const { contents } = toGeminiPrompt([
      { role: 'user', content: 'Weather in Paris and the time?' },
      {
        role: 'assistant', content: 'Let me look.', toolCalls: [
          { id: 'call_a', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { id: 'call_b', name: 'get_time', arguments: '' },
        ],
      },
      { role: 'tool', toolCallId: 'call_b', content: '12:00' },
      { role: 'tool', toolCallId: 'call_a', content: '{"temp":21,"unit":"C"}' },
    ]);
    assert.deepEqual(contents, [
      { role: 'user', parts: [{ text: 'Weather in Paris and the time?' }] },
      {
        role: 'model', parts: [
          { text: 'Let me look.' },
          { functionCall: { name: 'get_weather', args: { city: 'Paris' } }, thoughtSignature: SKIP_THOUGHT_SIGNATURE },
          { functionCall: { name: 'get_time', args: {} } },
        ],
      },
      {
        role: 'user', parts: [
          { functionResponse: { name: 'get_time', response: { output: '12:00' } } },
          { functionResponse: { name: 'get_weather', response: { temp: 21, unit: 'C' } } },
        ],
      },
    ]);
  });

  it('names a result by the message name when its call is not in the conversation; fails without either', () => {
    const { contents } = toGeminiPrompt([{ role: 'tool', toolCallId: 'call_gone', name: 'lookup', content: 'x' }]);
    assert.deepEqual(contents, [{ role: 'user', parts: [{ functionResponse: { name: 'lookup', response: { output: 'x' } } }] }]);
    assert.throws(() => toGeminiPrompt([{ role: 'tool', toolCallId: 'call_gone', content: 'x' }]), isRequestFailure(/messages\[0\]/));
  });

  it('fails (request) on arguments that are not a JSON object, and on a conversation of system messages only', () => {
    const call = { id: 'c', name: 'f', arguments: '[1, 2]' };
    assert.throws(() => toGeminiPrompt([{ role: 'user', content: 'x' }, { role: 'assistant', content: '', toolCalls: [call] }]), isRequestFailure(/messages\[1\]/));
    assert.throws(() => toGeminiPrompt([{ role: 'system', content: 'Be brief.' }]), isRequestFailure(/no user or assistant turn/));
  });
});

describe('toFunctionResponse', () => {
  it('sends a JSON object as it is, anything else as text under output', () => {
    assert.deepEqual(toFunctionResponse('{"ok":true}'), { ok: true });
    assert.deepEqual(toFunctionResponse('42'), { output: '42' });
    assert.deepEqual(toFunctionResponse('[1,2]'), { output: '[1,2]' });
    assert.deepEqual(toFunctionResponse('sunny'), { output: 'sunny' });
    assert.deepEqual(toFunctionResponse(''), { output: '' });
  });
});
