import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { prepareTools, unsupportedToolField } from '../../../src/providers/anthropic/tools.js';

const weather = {
  type: 'function',
  function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
};
const clock = { type: 'function', function: { name: 'get_time' } };

describe('anthropic tools', () => {
  it('maps function tools to name, description and input_schema (an empty object schema without parameters)', () => {
    assert.deepEqual(prepareTools({ tools: [weather, clock] }), {
      tools: [
        { name: 'get_weather', description: 'Weather for a city', input_schema: weather.function.parameters },
        { name: 'get_time', input_schema: { type: 'object', properties: {} } },
      ],
    });
  });

  const choices = [
    ['auto', { type: 'auto' }],
    ['required', { type: 'any' }],
    ['none', { type: 'none' }],
    [{ type: 'function', function: { name: 'get_time' } }, { type: 'tool', name: 'get_time' }],
  ] as const;
  for (const [choice, expected] of choices) {
    it(`maps tool_choice ${JSON.stringify(choice)}`, () => {
      assert.deepEqual(prepareTools({ tools: [clock], toolChoice: choice }).tool_choice, expected);
    });
  }

  it('maps parallel_tool_calls false to disable_parallel_tool_use on the choice (auto when none given, never on none)', () => {
    assert.deepEqual(prepareTools({ tools: [clock], parallelToolCalls: false }).tool_choice, { type: 'auto', disable_parallel_tool_use: true });
    assert.deepEqual(prepareTools({ tools: [clock], toolChoice: 'required', parallelToolCalls: false }).tool_choice, { type: 'any', disable_parallel_tool_use: true });
    assert.deepEqual(prepareTools({ tools: [clock], toolChoice: 'none', parallelToolCalls: false }).tool_choice, { type: 'none' });
    assert.equal(prepareTools({ tools: [clock], parallelToolCalls: true }).tool_choice, undefined);
  });

  it('sends no tool choice without tools', () => {
    assert.deepEqual(prepareTools({ toolChoice: 'auto', parallelToolCalls: false }), {});
  });

  it('reports what it cannot carry: other tool types, strict tools, other choices', () => {
    assert.equal(unsupportedToolField({ tools: [weather, clock], toolChoice: 'auto' }), null);
    assert.equal(unsupportedToolField({ tools: [{ type: 'custom', custom: { name: 'x' } }] }), 'tools');
    assert.equal(unsupportedToolField({ tools: [{ type: 'function', function: { description: 'no name' } }] }), 'tools');
    assert.equal(unsupportedToolField({ tools: [{ type: 'function', function: { name: 'f', strict: true } }] }), 'tools');
    assert.equal(unsupportedToolField({ tools: [clock], toolChoice: { type: 'allowed_tools', allowed_tools: {} } }), 'tool_choice');
    assert.equal(unsupportedToolField({ tools: [clock], toolChoice: 'sometimes' }), 'tool_choice');
    assert.equal(unsupportedToolField({ toolChoice: 'sometimes' }), null);
  });
});
