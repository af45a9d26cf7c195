/**
 * The body of POST /v1/chat/completions: the spec's fields plus the common
 * convention's, tool calling included. Unknown fields are dropped (never forwarded).
 */
import { z } from 'zod';

const textPart = z.object({ type: z.literal('text'), text: z.string() });

const message = z.object({
  role: z.enum(['system', 'user', 'assistant', 'developer', 'tool']),
  // null or absent is what OpenAI clients send for an assistant turn that only called tools.
  content: z.union([z.string(), z.array(textPart), z.null()]).optional(),
  name: z.string().optional(),
  tool_call_id: z.string().optional(),
  tool_calls: z.array(z.object({
    id: z.string(),
    type: z.literal('function'),
    function: z.object({ name: z.string(), arguments: z.string() }),
  })).optional(),
}).superRefine((m, ctx) => {
  if ((m.content === undefined || m.content === null) && !(m.role === 'assistant' && m.tool_calls !== undefined)) {
    ctx.addIssue({ code: 'custom', path: ['content'], message: 'content is required (only an assistant turn with tool_calls may leave it out or send null)' });
  }
  if (m.role === 'tool' && m.tool_call_id === undefined) {
    ctx.addIssue({ code: 'custom', path: ['tool_call_id'], message: 'a tool message answers a call: tool_call_id is required' });
  }
});

const optional = <T extends z.ZodType>(schema: T) => schema.nullish();

export const chatCompletionBody = z.object({
  model: z.string().min(1),
  messages: z.array(message).min(1),
  temperature: optional(z.number().min(0).max(2)),
  top_p: optional(z.number().min(0).max(1)),
  max_tokens: optional(z.number().int().min(1)),
  max_completion_tokens: optional(z.number().int().min(1)),
  stream: optional(z.boolean()),
  stream_options: optional(z.object({ include_usage: optional(z.boolean()) })),
  stop: optional(z.union([z.string(), z.array(z.string()).max(4)])),
  n: optional(z.literal(1)),
  presence_penalty: optional(z.number().min(-2).max(2)),
  frequency_penalty: optional(z.number().min(-2).max(2)),
  seed: optional(z.number().int()),
  user: optional(z.string()),
  response_format: optional(z.looseObject({ type: z.enum(['text', 'json_object', 'json_schema']) })),
  tools: optional(z.array(z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) }))),
  tool_choice: optional(z.union([z.enum(['none', 'auto', 'required']), z.looseObject({ type: z.string() })])),
  parallel_tool_calls: optional(z.boolean()),
});

export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;
