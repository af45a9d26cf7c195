import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { convertMessages, startsWithUser } from '../../../src/providers/anthropic/convert-messages.js';
import type { ChatMessage } from '../../../src/providers/types.js';

const text = (t: string) => ({ type: 'text', text: t });

describe('convert messages to an anthropic prompt', () => {
  it('puts every system message, wherever it stands, into system, in order', () => {
    const prompt = convertMessages([
      { role: 'system', content: 'First rule.' },
      { role: 'user', content: 'Hi' },
      { role: 'system', content: 'Second rule.' },
      { role: 'assistant', content: 'Hello' },
      { role: 'system', content: '   ' },
      { role: 'user', content: 'Bye' },
      { role: 'system', content: 'Last rule.' },
    ]);
    assert.equal(prompt.system, 'First rule.\n\nSecond rule.\n\nLast rule.');
    assert.deepEqual(prompt.messages, [
      { role: 'user', content: [text('Hi')] },
      { role: 'assistant', content: [text('Hello')] },
      { role: 'user', content: [text('Bye')] },
    ]);
  });

  it('sends no system when there is none', () => {
    assert.equal('system' in convertMessages([{ role: 'user', content: 'Hi' }]), false);
  });

  it('merges consecutive turns of one role; empty and whitespace-only text is left out', () => {
    const prompt = convertMessages([
      { role: 'user', content: 'One' },
      { role: 'user', content: '' },
      { role: 'user', content: 'Two' },
      { role: 'assistant', content: 'A' },
      { role: 'user', content: ' \n' },
      { role: 'assistant', content: 'B' },
      { role: 'user', content: 'Three', name: 'carol' },
    ]);
    assert.deepEqual(prompt.messages, [
      { role: 'user', content: [text('One'), text('Two')] },
      { role: 'assistant', content: [text('A'), text('B')] },
      { role: 'user', content: [text('Three')] },
    ]);
  });

  it('turns tool calls into tool_use blocks and tool results into one user turn, with the next user message', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Weather in Paris and Oslo?' },
      {
        role: 'assistant', content: 'Checking.', toolCalls: [
          { id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
          { id: 'call_2', name: 'get_weather', arguments: '{"city":"Oslo"}' },
          { id: 'call_3', name: 'get_time', arguments: '' },
          { id: 'call_4', name: 'get_time', arguments: 'not json' },
          { id: 'call_5', name: 'get_time', arguments: '[1, 2]' },
        ],
      },
      { role: 'tool', content: '18C', toolCallId: 'call_1' },
      { role: 'tool', content: '4C', toolCallId: 'call_2' },
      { role: 'tool', content: '12:00', toolCallId: 'call_3' },
      { role: 'tool', content: '', toolCallId: 'call_4' },
      { role: 'tool', content: '12:00', toolCallId: 'call_5' },
      { role: 'user', content: 'And tomorrow?' },
    ];
    assert.deepEqual(convertMessages(messages).messages, [
      { role: 'user', content: [text('Weather in Paris and Oslo?')] },
      {
        role: 'assistant', content: [
          text('Checking.'),
          { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
          { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'Oslo' } },
          { type: 'tool_use', id: 'call_3', name: 'get_time', input: {} },
          { type: 'tool_use', id: 'call_4', name: 'get_time', input: {} },
          { type: 'tool_use', id: 'call_5', name: 'get_time', input: {} },
        ],
      },
      {
        role: 'user', content: [
          { type: 'tool_result', tool_use_id: 'call_1', content: '18C' },
          { type: 'tool_result', tool_use_id: 'call_2', content: '4C' },
          { type: 'tool_result', tool_use_id: 'call_3', content: '12:00' },
          { type: 'tool_result', tool_use_id: 'call_4' },
          { type: 'tool_result', tool_use_id: 'call_5', content: '12:00' },
          text('And tomorrow?'),
        ],
      },
    ]);
  });

  it('puts tool results first in a user turn, as Anthropic requires', () => {
    const prompt = convertMessages([
      { role: 'user', content: 'Go' },
      { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'f', arguments: '{}' }] },
      { role: 'user', content: 'Before the result' },
      { role: 'tool', content: 'done', toolCallId: 'c1' },
    ]);
    assert.deepEqual(prompt.messages.at(-1), {
      role: 'user', content: [{ type: 'tool_result', tool_use_id: 'c1', content: 'done' }, text('Before the result')],
    });
  });

  it('appends a prefix as the final assistant turn, without its trailing whitespace, and says how much was cut', () => {
    const prompt = convertMessages([{ role: 'user', content: 'Tell a story' }], 'Once upon \n');
    assert.deepEqual(prompt.messages.at(-1), { role: 'assistant', content: [text('Once upon')] });
    assert.equal(prompt.trimmedChars, 2);
  });

  it('merges a prefix into an assistant turn that is already last', () => {
    const prompt = convertMessages([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello.' }], 'How ');
    assert.deepEqual(prompt.messages.at(-1), { role: 'assistant', content: [text('Hello.'), text('How')] });
    assert.equal(prompt.trimmedChars, 1);
  });

  it('cuts trailing whitespace from a final assistant turn without a prefix; a whitespace-only prefix counts whole', () => {
    const final = convertMessages([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Well, ' }]);
    assert.deepEqual(final.messages.at(-1), { role: 'assistant', content: [text('Well,')] });
    assert.equal(final.trimmedChars, 1);
    const blank = convertMessages([{ role: 'user', content: 'Hi' }], '  ');
    assert.deepEqual(blank.messages, [{ role: 'user', content: [text('Hi')] }]);
    assert.equal(blank.trimmedChars, 2);
    assert.equal(convertMessages([{ role: 'user', content: 'Hi ' }]).trimmedChars, 0);
  });

  it('says whether the turns start with the user (Anthropic requires it)', () => {
    assert.equal(startsWithUser(convertMessages([{ role: 'system', content: 'S' }, { role: 'user', content: 'Hi' }]).messages), true);
    assert.equal(startsWithUser(convertMessages([{ role: 'assistant', content: 'Welcome!' }, { role: 'user', content: 'Hi' }]).messages), false);
    assert.equal(startsWithUser(convertMessages([{ role: 'system', content: 'Only a system prompt' }]).messages), false);
    assert.equal(startsWithUser(convertMessages([{ role: 'user', content: '' }, { role: 'assistant', content: 'Hi' }]).messages), false);
  });
});
