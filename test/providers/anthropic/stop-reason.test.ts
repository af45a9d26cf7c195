import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { toFinishReason } from '../../../src/providers/anthropic/stop-reason.js';

describe('anthropic stop reasons', () => {
  const cases = [
    ['end_turn', 'stop'],
    ['stop_sequence', 'stop'],
    ['max_tokens', 'length'],
    ['model_context_window_exceeded', 'length'],
    ['tool_use', 'tool_calls'],
    ['refusal', 'content_filter'],
    // The server paused a long turn; the gateway does not resume it.
    ['pause_turn', 'stop'],
    ['a_reason_from_the_future', 'stop'],
    [null, 'stop'],
  ] as const;
  for (const [reason, finish] of cases) {
    it(`maps ${String(reason)} to ${finish}`, () => assert.equal(toFinishReason(reason), finish));
  }
});
