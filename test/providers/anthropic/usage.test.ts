import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mergeUsage, toTokenUsage } from '../../../src/providers/anthropic/usage.js';

describe('anthropic usage', () => {
  it('sums input, cache writes and cache reads into the prompt; the reads are the cached tokens', () => {
    const counts = mergeUsage({}, { input_tokens: 3, cache_creation_input_tokens: 100, cache_read_input_tokens: 2000, output_tokens: 7 });
    assert.deepEqual(toTokenUsage(counts), { promptTokens: 2103, completionTokens: 7, cachedTokens: 2000 });
  });

  it('lets each later report replace a count, never add to it; null counts are no report', () => {
    const counts = mergeUsage({}, { input_tokens: 40, cache_creation_input_tokens: null, output_tokens: 1 });
    mergeUsage(counts, { output_tokens: 5 });
    mergeUsage(counts, { output_tokens: 12 });
    assert.deepEqual(toTokenUsage(counts), { promptTokens: 40, completionTokens: 12 });
  });

  it('is null until both input and output were reported', () => {
    assert.equal(toTokenUsage(mergeUsage({}, { input_tokens: 4 })), null);
    assert.equal(toTokenUsage(mergeUsage({}, { output_tokens: 4 })), null);
    assert.equal(toTokenUsage(mergeUsage({}, 'nothing')), null);
    assert.equal(toTokenUsage(mergeUsage({}, { input_tokens: -1, output_tokens: 2 })), null);
  });
});
