import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { toGeminiTools, unsupportedToolField } from '../../../src/providers/gemini/prepare-tools.js';

const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  },
};
const time = { type: 'function', function: { name: 'get_time' } };

describe('toGeminiTools', () => {
  it('declares each function, its JSON Schema as parametersJsonSchema', () => {
    assert.deepEqual(toGeminiTools({ tools: [weather, time] }), {
      tools: [{
        functionDeclarations: [
          { name: 'get_weather', description: 'The weather in a city', parametersJsonSchema: weather.function.parameters },
          { name: 'get_time' },
        ],
      }],
    });
  });

  it('maps tool_choice to functionCallingConfig', () => {
    const config = (toolChoice: string | Record<string, unknown>) => toGeminiTools({ tools: [weather], toolChoice }).toolConfig;
    assert.deepEqual(config('auto'), { functionCallingConfig: { mode: 'AUTO' } });
    assert.deepEqual(config('required'), { functionCallingConfig: { mode: 'ANY' } });
    assert.deepEqual(config('none'), { functionCallingConfig: { mode: 'NONE' } });
    assert.deepEqual(config({ type: 'function', function: { name: 'get_weather' } }), {
      functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_weather'] },
    });
  });

  it('sends nothing without tools, even with a tool_choice', () => {
    assert.deepEqual(toGeminiTools({}), {});
    assert.deepEqual(toGeminiTools({ tools: [], toolChoice: 'none' }), {});
  });
});

describe('unsupportedToolField', () => {
  it('refuses what Gemini cannot honour: other tool types, unknown choices, parallel_tool_calls false', () => {
    assert.equal(unsupportedToolField({ tools: [weather], toolChoice: 'auto', parallelToolCalls: true }), null);
    assert.equal(unsupportedToolField({ tools: [{ type: 'code_interpreter' }] }), 'tools');
    assert.equal(unsupportedToolField({ tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }), 'tools');
    assert.equal(unsupportedToolField({ tools: [weather], toolChoice: 'sometimes' }), 'tool_choice');
    assert.equal(unsupportedToolField({ tools: [weather], toolChoice: { type: 'allowed_tools' } }), 'tool_choice');
    assert.equal(unsupportedToolField({ tools: [weather], parallelToolCalls: false }), 'parallel_tool_calls');
  });
});
