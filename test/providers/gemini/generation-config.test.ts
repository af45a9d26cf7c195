import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { supportsResponseFormat, toGenerationConfig } from '../../../src/providers/gemini/generation-config.js';
import { DEFAULT_ROUTE_PARAMS, type UpstreamRequest } from '../../../src/providers/types.js';

function request(overrides: Partial<UpstreamRequest> = {}): UpstreamRequest {
  return {
    model: 'gemini-test', params: DEFAULT_ROUTE_PARAMS, messages: [{ role: 'user', content: 'Hi' }],
    maxTokens: 50, temperature: 0.7, topP: 1, callerSet: { temperature: false, topP: false }, ...overrides,
  };
}

describe('toGenerationConfig', () => {
  it('always sends the output bound; sampling, stops, seed and penalties when set', () => {
    assert.deepEqual(toGenerationConfig(request()), { maxOutputTokens: 50, temperature: 0.7, topP: 1 });
    assert.deepEqual(toGenerationConfig(request({ temperature: 1.8, stop: ['END'], seed: 7, presencePenalty: 0.5, frequencyPenalty: -0.5 })), {
      maxOutputTokens: 50, temperature: 1.8, topP: 1, stopSequences: ['END'], seed: 7, presencePenalty: 0.5, frequencyPenalty: -0.5,
    });
  });

  it('never sends a field the route refuses', () => {
    const params = { ...DEFAULT_ROUTE_PARAMS, refuses: ['temperature', 'top_p', 'seed', 'presence_penalty'] };
    assert.deepEqual(toGenerationConfig(request({ params, seed: 7, presencePenalty: 1 })), { maxOutputTokens: 50 });
  });

  it('asks for JSON for json_object, and JSON under the given schema for json_schema', () => {
    const schema = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'], additionalProperties: false };
    assert.deepEqual(toGenerationConfig(request({ responseFormat: { type: 'json_object' } })), {
      maxOutputTokens: 50, temperature: 0.7, topP: 1, responseMimeType: 'application/json',
    });
    assert.deepEqual(toGenerationConfig(request({ responseFormat: { type: 'json_schema', json_schema: { name: 'n', strict: true, schema } } })), {
      maxOutputTokens: 50, temperature: 0.7, topP: 1, responseMimeType: 'application/json', responseJsonSchema: schema,
    });
    assert.deepEqual(toGenerationConfig(request({ responseFormat: { type: 'text' } })), { maxOutputTokens: 50, temperature: 0.7, topP: 1 });
  });
});

describe('supportsResponseFormat', () => {
  it('takes text, json_object and json_schema with an object schema', () => {
    assert.equal(supportsResponseFormat({ type: 'text' }), true);
    assert.equal(supportsResponseFormat({ type: 'json_object' }), true);
    assert.equal(supportsResponseFormat({ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } }), true);
    assert.equal(supportsResponseFormat({ type: 'json_schema', json_schema: { name: 'x' } }), true);
    assert.equal(supportsResponseFormat({ type: 'json_schema' }), false);
    assert.equal(supportsResponseFormat({ type: 'json_schema', json_schema: { schema: 'x' } }), false);
    assert.equal(supportsResponseFormat({ type: 'grammar' }), false);
  });
});
