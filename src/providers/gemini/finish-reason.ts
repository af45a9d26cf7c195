/**
 * Gemini's `finishReason` in OpenAI's words.
 *
 * - `STOP` → `stop`, or `tool_calls` when the answer called a function (Gemini
 *   says STOP for both, often in a later chunk than the call).
 * - `MAX_TOKENS` → `length`.
 * - The safety family (`SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`,
 *   `SPII`, `IMAGE_SAFETY`…) → `content_filter`; so is a prompt blocked by
 *   `promptFeedback.blockReason` (see `BLOCKED_PROMPT_FINISH`).
 * - A failed function-calling step (`MALFORMED_FUNCTION_CALL`,
 *   `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`) is a failure of the route
 *   ('malformed'): no answer came, and another route may give one.
 * - Anything else (`OTHER`, `LANGUAGE`, `FINISH_REASON_UNSPECIFIED`, a reason
 *   added later) → `stop` after an answer that delivered something; with
 *   nothing delivered it is a failure, as an empty answer for an unknown reason
 *   is no answer.
 */
import { UpstreamError, type FinishReason } from '../types.js';

const CONTENT_FILTERED = new Set([
  'SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII',
  'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT', 'IMAGE_RECITATION', 'MODEL_ARMOR',
]);
const FAILED_CALL = new Set(['MALFORMED_FUNCTION_CALL', 'UNEXPECTED_TOOL_CALL', 'TOO_MANY_TOOL_CALLS']);

/** A prompt Gemini blocked before answering (`promptFeedback.blockReason`, no candidates). */
export const BLOCKED_PROMPT_FINISH: FinishReason = 'content_filter';

export interface AnswerSoFar {
  /** Whether a function call came. */
  calledTool: boolean;
  /** Whether any text or call came. */
  delivered: boolean;
}

/** The finish reason, or an 'malformed' UpstreamError when the reason says the route failed. */
export function toFinishReason(id: string, reason: string, answer: AnswerSoFar): FinishReason {
  if (reason === 'STOP') return answer.calledTool ? 'tool_calls' : 'stop';
  if (reason === 'MAX_TOKENS') return 'length';
  if (CONTENT_FILTERED.has(reason)) return 'content_filter';
  if (FAILED_CALL.has(reason)) throw new UpstreamError('malformed', `${id} finished with ${reason}`);
  if (!answer.delivered) throw new UpstreamError('malformed', `${id} finished with ${reason} and no answer`);
  return 'stop';
}
