/**
 * Token counts the way OpenAI bills chat (o200k_base). The gateway estimates a
 * prompt with these before it reserves credits; the simulator reports them as
 * its usage.
 */
import { encode } from 'gpt-tokenizer';
import type { ChatMessage } from '../providers/types.js';

/** Every message is wrapped in a few tokens of its own (`<|start|>role…<|end|>`). */
const TOKENS_PER_MESSAGE = 3;
/** A `name` costs one token besides its own text. */
const TOKENS_PER_NAME = 1;
/** Every reply is primed with `<|start|>assistant<|message|>`. */
const TOKENS_PER_REPLY = 3;

/** User text is data: a `<|endoftext|>` in it is counted as text, never refused. */
const AS_PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

export function countTextTokens(text: string): number {
  return text === '' ? 0 : encode(text, AS_PLAIN_TEXT).length;
}

/** The token ids of `text`, special-token look-alikes encoded as plain text. */
export function encodeText(text: string): number[] {
  return encode(text, AS_PLAIN_TEXT);
}

/**
 * The prompt tokens of a chat, as in OpenAI's cookbook: per message 3, plus the
 * tokens of each field sent (role, content, name, tool_call_id), plus 1 for a
 * name; then 3 for the reply's priming.
 */
export function countPromptTokens(messages: readonly ChatMessage[]): number {
  let total = TOKENS_PER_REPLY;
  for (const message of messages) {
    total += TOKENS_PER_MESSAGE + countTextTokens(message.role) + countTextTokens(message.content);
    if (message.name !== undefined) total += TOKENS_PER_NAME + countTextTokens(message.name);
    if (message.toolCallId !== undefined) total += countTextTokens(message.toolCallId);
  }
  return total;
}
