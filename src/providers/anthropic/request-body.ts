/**
 * The request in Anthropic's words (`POST /v1/messages`), and the fields of an
 * OpenAI request that Anthropic cannot honour.
 *
 * Sent: `model`, `max_tokens` (always: Anthropic requires it), `system` and
 * `messages` (convert-messages.ts), `temperature` (Anthropic takes 0–1 where
 * OpenAI takes 0–2: a value above 1 is sent as 1, Anthropic's most random),
 * `top_p` (only when the caller set it: the gateway's default of 1 is
 * Anthropic's own, and recent Claude models refuse `temperature` and `top_p`
 * together; for the same reason the gateway's default temperature is left out
 * when the caller set only `top_p`), `stop` → `stop_sequences`, `user` →
 * `metadata.user_id`, tools (tools.ts), `stream`. A field the route's model
 * refuses (`params.refuses`) is not sent.
 *
 * Not honoured (the route is skipped for the request, never served without it):
 * `response_format` of type `json_object` or `json_schema` (Anthropic has no
 * JSON mode), `seed`, a non-zero `presence_penalty` or `frequency_penalty`, a
 * `stop` sequence that is only whitespace (Anthropic refuses it), a `user` over
 * 256 characters (the most `metadata.user_id` takes), tools Anthropic cannot
 * carry (tools.ts), and `messages` that do not start with a user turn.
 */
import type { UpstreamRequest } from '../types.js';
import { convertMessages, startsWithUser, type AnthropicPrompt } from './convert-messages.js';
import { prepareTools, unsupportedToolField } from './tools.js';

/** The longest `metadata.user_id` Anthropic takes. */
const MAX_USER_ID_CHARS = 256;

/** The OpenAI wire name of the first field of `request` Anthropic cannot honour, or null. */
export function unsupportedField(request: UpstreamRequest): string | null {
  if (!startsWithUser(convertMessages(request.messages, request.prefix).messages)) return 'messages';
  if (request.stop?.some((sequence) => sequence.trim() === '')) return 'stop';
  if (request.seed !== undefined) return 'seed';
  // A penalty of 0 is none at all: honoured by sending nothing.
  if (request.presencePenalty !== undefined && request.presencePenalty !== 0) return 'presence_penalty';
  if (request.frequencyPenalty !== undefined && request.frequencyPenalty !== 0) return 'frequency_penalty';
  if (request.user !== undefined && request.user.length > MAX_USER_ID_CHARS) return 'user';
  const format = request.responseFormat?.type;
  if (format !== undefined && format !== 'text') return 'response_format';
  return unsupportedToolField(request);
}

export function toMessagesBody(request: UpstreamRequest, prompt: AnthropicPrompt, stream: boolean): Record<string, unknown> {
  const refuses = new Set(request.params.refuses);
  const body: Record<string, unknown> = { model: request.model, max_tokens: request.maxTokens };
  if (prompt.system !== undefined) body.system = prompt.system;
  body.messages = prompt.messages;
  const { callerSet } = request;
  if (!refuses.has('temperature') && (callerSet.temperature || !callerSet.topP)) body.temperature = Math.min(request.temperature, 1);
  if (!refuses.has('top_p') && callerSet.topP) body.top_p = request.topP;
  if (request.stop !== undefined && request.stop.length > 0) body.stop_sequences = request.stop;
  if (request.user !== undefined) body.metadata = { user_id: request.user };
  Object.assign(body, prepareTools(request));
  body.stream = stream;
  return body;
}
