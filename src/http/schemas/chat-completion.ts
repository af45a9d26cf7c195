/**
 * The body of POST /v1/chat/completions: the spec's fields plus the common
 * convention's, tool calling included. Unknown fields are dropped (never forwarded).
 * The free-form JSON that is forwarded (a tool's parameters, a json_schema, a
 * tool_choice object) is bounded in depth and size.
 */
import { z } from 'zod';
import { exceededBound, type JsonBounds } from '../json-bounds.js';

/** Each free-form value: deeper than JSON-schema validators go, far deeper than OpenAI's structured outputs allow. */
export const FREE_FORM_BOUNDS: JsonBounds = { maxDepth: 32, maxValues: 10_000 };

/**
 * Checks each field of a loose object that its schema does not name (forwarded as
 * sent) against FREE_FORM_BOUNDS; a field past them is an issue at its own path.
 */
function boundUnnamedFields(named: readonly string[]) {
  return (value: Record<string, unknown>, ctx: z.RefinementCtx<Record<string, unknown>>): void => {
    for (const [field, inner] of Object.entries(value)) {
      if (named.includes(field)) continue;
      const exceeded = exceededBound(inner, FREE_FORM_BOUNDS);
      if (exceeded === 'depth') {
        ctx.addIssue({ code: 'custom', path: [field], message: `nested more than ${FREE_FORM_BOUNDS.maxDepth} levels deep (the most allowed here)` });
      } else if (exceeded === 'values') {
        ctx.addIssue({ code: 'custom', path: [field], message: `holds more than ${FREE_FORM_BOUNDS.maxValues} values (the most allowed here)` });
      }
    }
  };
}

/** A loose object (its other fields forwarded as sent) whose other fields are bounded. */
function boundedLooseObject<T extends z.core.$ZodLooseShape>(shape: T) {
  return z.looseObject(shape).superRefine(boundUnnamedFields(Object.keys(shape)));
}

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
  response_format: optional(boundedLooseObject({ type: z.enum(['text', 'json_object', 'json_schema']) })),
  tools: optional(z.array(boundedLooseObject({ type: z.literal('function'), function: boundedLooseObject({ name: z.string() }) }))),
  tool_choice: optional(z.union([z.enum(['none', 'auto', 'required']), boundedLooseObject({ type: z.string() })])),
  parallel_tool_calls: optional(z.boolean()),
});

export type ChatCompletionBody = z.infer<typeof chatCompletionBody>;
