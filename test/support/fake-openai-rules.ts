/**
 * What the fake OpenAI-compatible upstream refuses and continues the way real
 * servers do: OpenAI's reasoning models (o-series, gpt-5) refuse `max_tokens`
 * and any sampling parameter but the default; a server with
 * `continue_final_message` (vLLM) goes on from a final assistant turn.
 */

/** Model names the fake treats as reasoning models, as OpenAI's own. */
const REASONING = /^(?:o\d|gpt-5)/;

/** The 400 message OpenAI gives a reasoning model's refused parameter, or null. */
export function reasoningRefusal(model: string, body: Record<string, unknown>): string | null {
  if (!REASONING.test(model)) return null;
  if (body.max_tokens !== undefined) {
    return "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.";
  }
  for (const field of ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty']) {
    const value = body[field];
    const fallback = field === 'temperature' || field === 'top_p' ? 1 : 0;
    if (value !== undefined && value !== fallback) {
      return `Unsupported value: '${field}' does not support ${String(value)} with this model. Only the default (${fallback}) value is supported.`;
    }
  }
  return null;
}

/** The output bound the request asks for, in whichever field carries it. */
export function outputBoundOf(body: Record<string, unknown>): number {
  if (typeof body.max_tokens === 'number') return body.max_tokens;
  if (typeof body.max_completion_tokens === 'number') return body.max_completion_tokens;
  return Infinity;
}

/**
 * The text still to say when the request asks to continue its final assistant
 * turn: the reply after that prefix (the whole reply if it does not start so).
 */
export function continuedReply(reply: string, body: Record<string, unknown>): string {
  if (body.continue_final_message !== true || !Array.isArray(body.messages)) return reply;
  const last: unknown = body.messages.at(-1);
  const prefix = typeof last === 'object' && last !== null && (last as { role?: unknown }).role === 'assistant'
    ? (last as { content?: unknown }).content : undefined;
  return typeof prefix === 'string' && reply.startsWith(prefix) ? reply.slice(prefix.length) : reply;
}
