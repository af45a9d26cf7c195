/**
 * One `GenerateContentResponse` (a whole answer, or one chunk of a stream:
 * Gemini sends the same shape for both) as typed pieces: the first candidate's
 * text and function calls in the order of its parts, its finish reason, a
 * prompt block, and the usage so far. Thought parts (`thought: true`, the
 * model's thought summaries) are not the answer and are left out.
 */
import { isRecord, snippetOf } from '../http.js';
import { UpstreamError, type TokenUsage } from '../types.js';
import { toUsage } from './usage.js';

export type AnswerPiece =
  | { kind: 'text'; text: string }
  /** `arguments` is the call's `args` as JSON text, `{}` when it had none; `id` only when Gemini gave one. */
  | { kind: 'call'; id?: string; name: string; arguments: string };

export interface GeminiResponse {
  pieces: AnswerPiece[];
  finishReason: string | null;
  /** `promptFeedback.blockReason` when the prompt was blocked and no candidate came. */
  blockReason: string | null;
  usage: TokenUsage | null;
}

/** `value` parsed from `raw` (kept for the messages of failures); 'malformed' when it is not a response, or is an error. */
export function parseResponse(id: string, value: unknown, raw: string): GeminiResponse {
  if (!isRecord(value)) throw new UpstreamError('malformed', `${id} sent a response that is not a JSON object: ${snippetOf(raw)}`);
  if (value.error !== undefined && value.error !== null) throw new UpstreamError('malformed', `${id} sent an error: ${snippetOf(raw)}`);
  const candidates = value.candidates ?? [];
  if (!Array.isArray(candidates)) throw new UpstreamError('malformed', `${id} sent candidates that are not a list: ${snippetOf(raw)}`);
  const first: unknown = candidates[0];
  if (first !== undefined && !isRecord(first)) {
    throw new UpstreamError('malformed', `${id} sent a candidate that is not an object: ${snippetOf(raw)}`);
  }
  const candidate = isRecord(first) ? first : undefined;
  const feedback = value.promptFeedback;
  const blockReason = candidate === undefined && isRecord(feedback) && typeof feedback.blockReason === 'string' ? feedback.blockReason : null;
  return {
    pieces: candidate === undefined ? [] : piecesOf(id, candidate.content, raw),
    finishReason: typeof candidate?.finishReason === 'string' ? candidate.finishReason : null,
    blockReason,
    usage: toUsage(value.usageMetadata),
  };
}

function piecesOf(id: string, content: unknown, raw: string): AnswerPiece[] {
  // A candidate stopped by a filter may have no content at all, or content without parts.
  if (!isRecord(content) || content.parts === undefined) return [];
  if (!Array.isArray(content.parts)) throw new UpstreamError('malformed', `${id} sent parts that are not a list: ${snippetOf(raw)}`);
  return content.parts.flatMap((part): AnswerPiece[] => {
    if (!isRecord(part) || part.thought === true) return [];
    if (typeof part.text === 'string') return part.text === '' ? [] : [{ kind: 'text', text: part.text }];
    const call = part.functionCall;
    if (call === undefined) return []; // Parts the gateway never asks for (code execution, inline data).
    if (!isRecord(call) || typeof call.name !== 'string' || call.name === '' || (call.args !== undefined && !isRecord(call.args))) {
      throw new UpstreamError('malformed', `${id} sent a function call without a name or with arguments that are not an object: ${snippetOf(raw)}`);
    }
    return [{
      kind: 'call',
      ...(typeof call.id === 'string' && call.id !== '' && { id: call.id }),
      name: call.name,
      arguments: JSON.stringify(call.args ?? {}),
    }];
  });
}
