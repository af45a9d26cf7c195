import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { toFinishReason } from '../../../src/providers/gemini/finish-reason.js';
import { toUsage } from '../../../src/providers/gemini/usage.js';
import { UpstreamError } from '../../../src/providers/types.js';

const text = { calledTool: false, delivered: true };
const call = { calledTool: true, delivered: true };
const nothing = { calledTool: false, delivered: false };

const malformed = (error: unknown): boolean => error instanceof UpstreamError && error.failure === 'malformed' && error.retryable;

describe('toFinishReason', () => {
  it('STOP is stop, or tool_calls when the answer called a function', () => {
    assert.equal(toFinishReason('g', 'STOP', text), 'stop');
    assert.equal(toFinishReason('g', 'STOP', call), 'tool_calls');
    assert.equal(toFinishReason('g', 'STOP', nothing), 'stop');
  });

  it('MAX_TOKENS is length, even after a call', () => {
    assert.equal(toFinishReason('g', 'MAX_TOKENS', text), 'length');
    assert.equal(toFinishReason('g', 'MAX_TOKENS', call), 'length');
  });

  for (const reason of ['SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY']) {
    it(`${reason} is content_filter, with or without content`, () => {
      assert.equal(toFinishReason('g', reason, text), 'content_filter');
      assert.equal(toFinishReason('g', reason, nothing), 'content_filter');
    });
  }

  for (const reason of ['MALFORMED_FUNCTION_CALL', 'UNEXPECTED_TOOL_CALL', 'TOO_MANY_TOOL_CALLS']) {
    it(`${reason} is a failure of the route`, () => {
      assert.throws(() => toFinishReason('g', reason, text), malformed);
    });
  }

  for (const reason of ['OTHER', 'LANGUAGE', 'FINISH_REASON_UNSPECIFIED', 'SOMETHING_NEW']) {
    it(`${reason} is stop after an answer, a failure with nothing delivered`, () => {
      assert.equal(toFinishReason('g', reason, text), 'stop');
      assert.throws(() => toFinishReason('g', reason, nothing), malformed);
    });
  }
});

describe('toUsage', () => {
  it('prompt as reported (cached inside it); completion = candidates + thoughts', () => {
    assert.deepEqual(toUsage({ promptTokenCount: 100, candidatesTokenCount: 20, thoughtsTokenCount: 30, cachedContentTokenCount: 60, totalTokenCount: 150 }), {
      promptTokens: 100, completionTokens: 50, cachedTokens: 60, reasoningTokens: 30,
    });
  });

  it('counts Gemini leaves out are 0; no promptTokenCount, no usage', () => {
    assert.deepEqual(toUsage({ promptTokenCount: 9, totalTokenCount: 9 }), { promptTokens: 9, completionTokens: 0 });
    assert.equal(toUsage({ candidatesTokenCount: 3 }), null);
    assert.equal(toUsage({ promptTokenCount: -1 }), null);
    assert.equal(toUsage(undefined), null);
  });

  it('what a built-in tool read is prompt', () => {
    assert.deepEqual(toUsage({ promptTokenCount: 9, toolUsePromptTokenCount: 4, candidatesTokenCount: 1 }), { promptTokens: 13, completionTokens: 1 });
  });
});
