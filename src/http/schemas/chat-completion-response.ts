/**
 * What POST /v1/chat/completions answers: the completion (JSON), and the chunks
 * of its stream (`text/event-stream`, each `data:` line one chunk, then `[DONE]`).
 * The gateway's own types of these objects (src/gateway/chat-types.ts) are inferred from here.
 */
import { z } from 'zod';
import { errorBody } from './error.js';

const count = z.number().int().nonnegative();

export const autoChoice = z.object({
  class: z.enum(['simple', 'code', 'complex']),
  alias: z.string(),
  reasons: z.array(z.string()).describe('The features of this prompt that weighed most for the class, in words; and when the model was unsure, what when_unsure chose'),
  probabilities: z.object({ simple: z.number().min(0).max(1), code: z.number().min(0).max(1), complex: z.number().min(0).max(1) })
    .describe('The classifier\'s probability of each class'),
}).describe('svc-auto\'s choice: the class of the request and the alias that served it');

export const svcObject = z.object({
  requested_model: z.string(),
  routed_model: z.string().describe('The upstream model that answered'),
  credits_used: count,
  balance_remaining: z.number().int(),
  latency_ms: count.describe('From the request\'s arrival to the last byte of the response'),
  provider: z.string(),
  auto: autoChoice.optional(),
  routes: z.array(z.object({ provider: z.string(), model: z.string() })).optional()
    .describe('Every route that contributed, in order, when an answer that broke off was continued on another'),
}).describe('The gateway\'s metering metadata');

export const chatUsage = z.object({
  prompt_tokens: count,
  completion_tokens: count,
  total_tokens: count,
  prompt_tokens_details: z.object({ cached_tokens: count }).optional(),
  completion_tokens_details: z.object({ reasoning_tokens: count }).optional(),
});

export const wireToolCall = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export const assistantMessage = z.union([
  z.object({ role: z.literal('assistant'), content: z.string() }),
  z.object({ role: z.literal('assistant'), content: z.string().nullable(), tool_calls: z.array(wireToolCall) }),
]);

export const finishReason = z.enum(['stop', 'length', 'content_filter', 'tool_calls']);

export const chatCompletionObject = z.object({
  id: z.string().describe('chatcmpl-…'),
  object: z.literal('chat.completion'),
  created: z.number().int(),
  model: z.string().describe('The alias asked for'),
  choices: z.array(z.object({ index: z.number().int(), message: assistantMessage, finish_reason: finishReason })),
  usage: chatUsage,
  svc: svcObject,
});

const chunkToolCall = z.object({
  index: z.number().int(),
  id: z.string().optional(),
  type: z.literal('function').optional(),
  function: z.object({ name: z.string().optional(), arguments: z.string() }),
});

export const chatCompletionChunk = z.object({
  id: z.string(),
  object: z.literal('chat.completion.chunk'),
  created: z.number().int(),
  model: z.string(),
  choices: z.array(z.object({
    index: z.number().int(),
    delta: z.object({ role: z.literal('assistant').optional(), content: z.string().nullable().optional(), tool_calls: z.array(chunkToolCall).optional() }),
    finish_reason: finishReason.nullable(),
  })),
  usage: chatUsage.optional().describe('On the chunk with finish_reason, and on the include_usage chunk'),
  svc: svcObject.optional(),
}).describe('One `data:` line of a stream. A stream that fails after its first content ends with one error body chunk (StreamErrorChunk), then `[DONE]`');

export const streamErrorChunk = errorBody.extend({ usage: chatUsage.optional(), svc: svcObject.optional() })
  .describe('The last chunk of a stream that broke off after content reached the client: what was delivered is charged');

export type AutoChoice = z.infer<typeof autoChoice>;
export type Svc = z.infer<typeof svcObject>;
export type ChatUsage = z.infer<typeof chatUsage>;
export type WireToolCall = z.infer<typeof wireToolCall>;
export type AssistantMessage = z.infer<typeof assistantMessage>;
export type ChatCompletion = z.infer<typeof chatCompletionObject>;
