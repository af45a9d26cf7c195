import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { convertMessages } from '../../../src/providers/anthropic/convert-messages.js';
import { toMessagesBody, unsupportedField } from '../../../src/providers/anthropic/request-body.js';
import { DEFAULT_ROUTE_PARAMS, type UpstreamRequest } from '../../../src/providers/types.js';

function request(overrides: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return {
    model: 'claude-haiku-4-5',
    params: DEFAULT_ROUTE_PARAMS,
    messages: [{ role: 'user', content: 'Hi' }],
    maxTokens: 50,
    temperature: 0.7,
    topP: 1,
    callerSet: { temperature: false, topP: false },
    ...overrides,
  };
}

function bodyOf(r: UpstreamRequest, stream = false): Record<string, unknown> {
  return toMessagesBody(r, convertMessages(r.messages, r.prefix), stream);
}

describe('anthropic request body', () => {
  it('always sends max_tokens; the gateway default temperature; no top_p unless the caller set it', () => {
    assert.deepEqual(bodyOf(request()), {
      model: 'claude-haiku-4-5', max_tokens: 50, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
      temperature: 0.7, stream: false,
    });
    assert.equal(bodyOf(request(), true).stream, true);
  });

  it('clamps temperature to 1 (Anthropic takes 0–1); 0–1 passes unchanged', () => {
    assert.equal(bodyOf(request({ temperature: 1.6, callerSet: { temperature: true, topP: false } })).temperature, 1);
    assert.equal(bodyOf(request({ temperature: 2 })).temperature, 1);
    assert.equal(bodyOf(request({ temperature: 0 })).temperature, 0);
    assert.equal(bodyOf(request({ temperature: 0.35 })).temperature, 0.35);
  });

  it('sends the caller\'s top_p, without the gateway\'s default temperature unless the caller set that too', () => {
    const onlyTopP = bodyOf(request({ topP: 0.9, callerSet: { temperature: false, topP: true } }));
    assert.equal(onlyTopP.top_p, 0.9);
    assert.equal('temperature' in onlyTopP, false);
    const both = bodyOf(request({ temperature: 0.2, topP: 0.9, callerSet: { temperature: true, topP: true } }));
    assert.deepEqual([both.temperature, both.top_p], [0.2, 0.9]);
  });

  it('sends no field the route\'s model refuses', () => {
    const params = { ...DEFAULT_ROUTE_PARAMS, refuses: ['temperature', 'top_p'] };
    const body = bodyOf(request({ params, callerSet: { temperature: true, topP: true } }));
    assert.equal('temperature' in body, false);
    assert.equal('top_p' in body, false);
  });

  it('sends stop as stop_sequences and user as metadata.user_id', () => {
    const body = bodyOf(request({ stop: ['###', 'END'], user: 'user-42' }));
    assert.deepEqual(body.stop_sequences, ['###', 'END']);
    assert.deepEqual(body.metadata, { user_id: 'user-42' });
    assert.equal('stop_sequences' in bodyOf(request({ stop: [] })), false);
  });

  it('honours what Anthropic can carry', () => {
    const fine = request({
      stop: ['###'], user: 'u', responseFormat: { type: 'text' }, presencePenalty: 0, frequencyPenalty: 0,
      tools: [{ type: 'function', function: { name: 'f' } }], toolChoice: 'required', parallelToolCalls: false,
      callerSet: { temperature: true, topP: true },
    });
    assert.equal(unsupportedField(fine), null);
  });

  const refused: Array<[string, Partial<UpstreamRequest>]> = [
    ['response_format', { responseFormat: { type: 'json_object' } }],
    ['response_format', { responseFormat: { type: 'json_schema', json_schema: { name: 'x', schema: {} } } }],
    ['seed', { seed: 7 }],
    ['presence_penalty', { presencePenalty: 0.5 }],
    ['frequency_penalty', { frequencyPenalty: -1 }],
    ['stop', { stop: ['END', '\n'] }],
    ['user', { user: 'u'.repeat(257) }],
    ['tools', { tools: [{ type: 'function', function: { name: 'f', strict: true } }] }],
    ['tool_choice', { tools: [{ type: 'function', function: { name: 'f' } }], toolChoice: { type: 'allowed_tools' } }],
    ['messages', { messages: [{ role: 'assistant', content: 'Welcome!' }, { role: 'user', content: 'Hi' }] }],
    ['messages', { messages: [{ role: 'system', content: 'Write a haiku.' }] }],
  ];
  for (const [field, overrides] of refused) {
    it(`cannot honour ${field}: ${JSON.stringify(overrides).slice(0, 70)}`, () => {
      assert.equal(unsupportedField(request(overrides)), field);
    });
  }
});
