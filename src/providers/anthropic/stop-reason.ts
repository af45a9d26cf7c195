/**
 * Anthropic's `stop_reason` as OpenAI's finish reason.
 *
 * - `end_turn`, `stop_sequence` → `stop`
 * - `max_tokens`, `model_context_window_exceeded` → `length` (the answer was cut by a bound)
 * - `tool_use` → `tool_calls`
 * - `refusal` → `content_filter` (the model's safety classifier stopped it)
 * - `pause_turn` → `stop`: the server paused a long turn (server tools); the
 *   gateway does not resume it, and what came so far is the answer.
 * - anything else, or none → `stop`
 */
import type { FinishReason } from '../types.js';

export function toFinishReason(reason: unknown): FinishReason {
  switch (reason) {
    case 'max_tokens':
    case 'model_context_window_exceeded':
      return 'length';
    case 'tool_use':
      return 'tool_calls';
    case 'refusal':
      return 'content_filter';
    default:
      return 'stop';
  }
}
