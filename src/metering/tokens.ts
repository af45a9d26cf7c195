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

/**
 * BPE work grows with the square of a pre-token's length, and a run without
 * spaces (`aaaa…`, base64) or of nothing but whitespace is one pre-token: such runs are counted in slices of
 * this many characters, which keeps the count linear (and a slice boundary adds
 * at most a token).
 */
const MAX_RUN = 256;
/** Text is encoded in pieces about this long, cut before whitespace so that no token is split. */
const PIECE = 16_384;

/**
 * The tokens of `text`. With `limit`, counting stops once the count passes it
 * (the result is then some number above `limit`), so that an oversized prompt
 * costs no more work than the largest context window.
 */
export function countTextTokens(text: string, limit = Number.POSITIVE_INFINITY): number {
  let total = 0;
  for (let start = 0; start < text.length && total <= limit; ) {
    let end = Math.min(text.length, start + PIECE);
    if (end < text.length) {
      const space = text.lastIndexOf(' ', end);
      if (space > start) end = space;
    }
    total += countPiece(text.slice(start, end));
    start = end;
  }
  return total;
}

/**
 * Runs of one kind (all whitespace, or none). Each run is matched once from its
 * start, so finding the long ones reads every character once (a pattern such as
 * `\S{257,}` would restart at every position of a 256-character run).
 */
const RUN = /\S+|\s+/g;

function countPiece(piece: string): number {
  let total = 0;
  let last = 0;
  for (const run of piece.matchAll(RUN)) {
    if (run[0].length <= MAX_RUN) continue;
    total += encode(piece.slice(last, run.index), AS_PLAIN_TEXT).length;
    for (let i = 0; i < run[0].length; i += MAX_RUN) total += encode(run[0].slice(i, i + MAX_RUN), AS_PLAIN_TEXT).length;
    last = run.index + run[0].length;
  }
  return total + encode(piece.slice(last), AS_PLAIN_TEXT).length;
}

/** The token ids of `text`, special-token look-alikes encoded as plain text. */
export function encodeText(text: string): number[] {
  return encode(text, AS_PLAIN_TEXT);
}

/**
 * The prompt tokens of a chat, as in OpenAI's cookbook: per message 3, plus the
 * tokens of each field sent (role, content, name, tool_call_id), plus 1 for a
 * name; then 3 for the reply's priming. With `limit`, stops once past it.
 */
export function countPromptTokens(messages: readonly ChatMessage[], limit = Number.POSITIVE_INFINITY): number {
  let total = TOKENS_PER_REPLY;
  for (const message of messages) {
    const texts = [message.role, message.content, message.name, message.toolCallId, ...(message.toolCalls ?? []).flatMap((c) => [c.name, c.arguments])];
    total += TOKENS_PER_MESSAGE + (message.name !== undefined ? TOKENS_PER_NAME : 0);
    for (const text of texts) {
      if (total > limit) return total;
      if (text !== undefined) total += countTextTokens(text, limit - total);
    }
  }
  return total;
}
