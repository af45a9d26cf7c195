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

/** The characters `\s` matches in a JavaScript regular expression. */
function isSpace(code: number): boolean {
  return code === 0x20 || (code >= 0x09 && code <= 0x0d) || code === 0xa0 || code === 0x1680 || (code >= 0x2000 && code <= 0x200a)
    || code === 0x2028 || code === 0x2029 || code === 0x202f || code === 0x205f || code === 0x3000 || code === 0xfeff;
}

/**
 * Encodes a piece, cutting every run of one kind (all whitespace, or none)
 * longer than MAX_RUN into slices. One pass over the characters, nothing
 * allocated per word: the profile of a 100,000-token prompt showed a regex
 * match object per word costing more than the BPE itself.
 */
function countPiece(piece: string): number {
  let total = 0;
  let last = 0;
  let runStart = 0;
  let runSpace = piece.length > 0 && isSpace(piece.charCodeAt(0));
  for (let i = 1; i <= piece.length; i++) {
    const space = i < piece.length && isSpace(piece.charCodeAt(i));
    if (i < piece.length && space === runSpace) continue;
    if (i - runStart > MAX_RUN) {
      total += encode(piece.slice(last, runStart), AS_PLAIN_TEXT).length;
      for (let j = runStart; j < i; j += MAX_RUN) total += encode(piece.slice(j, Math.min(i, j + MAX_RUN)), AS_PLAIN_TEXT).length;
      last = i;
    }
    runStart = i;
    runSpace = space;
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
