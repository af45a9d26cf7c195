/**
 * The conversation in Gemini's words: system messages become one
 * `systemInstruction`, the rest `contents` of `user` and `model` turns.
 *
 * - Every system message (in order) is one text part of `systemInstruction`.
 * - `assistant` is `model`; its tool calls are `functionCall` parts after its text.
 * - A `tool` message is a `functionResponse` part of a `user` turn, named after
 *   the call it answers (found by `tool_call_id` among the earlier assistant
 *   turns' calls, else the message's own `name`).
 * - Consecutive turns of one role are merged, as Gemini wants them alternating:
 *   the results of parallel calls become one turn, as Gemini expects.
 * - Empty texts are left out: Gemini refuses an empty text part.
 *
 * A conversation this cannot write (a tool result whose call is unknown,
 * arguments that are not a JSON object) is the gateway's own failure
 * ('request'), not the upstream's.
 */
import { isRecord, parseJson } from '../http.js';
import { UpstreamError, type ChatMessage, type ToolCall } from '../types.js';

export type GeminiPart =
  | { text: string }
  | { functionCall: { name: string; args: Record<string, unknown> }; thoughtSignature?: string }
  | { functionResponse: { name: string; response: Record<string, unknown> } };

export interface GeminiContent {
  role: 'user' | 'model';
  parts: GeminiPart[];
}

export interface GeminiPrompt {
  systemInstruction?: { parts: Array<{ text: string }> };
  contents: GeminiContent[];
}

/**
 * What stands in for the thought signature of a replayed function call. Gemini 3
 * refuses a model turn's first `functionCall` without one; the OpenAI format has
 * no place to carry the real one, and Google documents this value for histories
 * that lack it.
 */
export const SKIP_THOUGHT_SIGNATURE = 'skip_thought_signature_validator';

export function toGeminiPrompt(messages: readonly ChatMessage[]): GeminiPrompt {
  const system: Array<{ text: string }> = [];
  const contents: GeminiContent[] = [];
  const callNames = new Map<string, string>();
  for (const [index, message] of messages.entries()) {
    if (message.role === 'system') {
      if (message.content !== '') system.push({ text: message.content });
      continue;
    }
    const turn = toContent(message, index, callNames);
    if (turn.parts.length === 0) continue;
    const last = contents.at(-1);
    if (last?.role === turn.role) last.parts.push(...turn.parts);
    else contents.push(turn);
  }
  if (contents.length === 0) throw new UpstreamError('request', 'gemini: the conversation has no user or assistant turn');
  return { ...(system.length > 0 && { systemInstruction: { parts: system } }), contents };
}

function toContent(message: ChatMessage, index: number, callNames: Map<string, string>): GeminiContent {
  switch (message.role) {
    case 'assistant': {
      const calls = message.toolCalls ?? [];
      for (const call of calls) callNames.set(call.id, call.name);
      const parts: GeminiPart[] = textParts(message.content);
      parts.push(...calls.map((call, i) => functionCallPart(call, index, i === 0)));
      return { role: 'model', parts };
    }
    case 'tool':
      return { role: 'user', parts: [functionResponsePart(message, index, callNames)] };
    default:
      return { role: 'user', parts: textParts(message.content) };
  }
}

function textParts(text: string): GeminiPart[] {
  return text === '' ? [] : [{ text }];
}

function functionCallPart(call: ToolCall, index: number, first: boolean): GeminiPart {
  // An empty string is what some clients send for a call without arguments.
  const args = call.arguments.trim() === '' ? {} : parseJson(call.arguments);
  if (!isRecord(args)) {
    throw new UpstreamError('request', `gemini: messages[${index}] has a tool call whose arguments are not a JSON object`);
  }
  return { functionCall: { name: call.name, args }, ...(first && { thoughtSignature: SKIP_THOUGHT_SIGNATURE }) };
}

function functionResponsePart(message: ChatMessage, index: number, callNames: ReadonlyMap<string, string>): GeminiPart {
  const name = (message.toolCallId !== undefined ? callNames.get(message.toolCallId) : undefined) ?? message.name;
  if (name === undefined || name === '') {
    throw new UpstreamError('request', `gemini: messages[${index}] answers a tool call that no earlier assistant turn made`);
  }
  return { functionResponse: { name, response: toFunctionResponse(message.content) } };
}

/**
 * Gemini takes a function's result as a JSON object: a tool message whose
 * content is one is sent as it is; any other content goes as text under
 * `output`, the key Google documents for a function's output.
 */
export function toFunctionResponse(content: string): Record<string, unknown> {
  const value = parseJson(content);
  return isRecord(value) ? value : { output: content };
}
