/**
 * OpenAI's tools and tool choice in Anthropic's words.
 *
 * - `{type: 'function', function: {name, description, parameters}}` →
 *   `{name, description, input_schema: parameters}`; with no parameters, the
 *   schema of an object without properties.
 * - `tool_choice`: `auto` → `{type: 'auto'}`, `required` → `{type: 'any'}`,
 *   `none` → `{type: 'none'}`, `{type: 'function', function: {name}}` →
 *   `{type: 'tool', name}`.
 * - `parallel_tool_calls: false` → `disable_parallel_tool_use: true` on the
 *   choice (`auto` when none was given; `none` calls no tool at all).
 * - Without tools, neither choice is sent: there is nothing to choose from.
 *
 * What Anthropic's format cannot carry is reported, never dropped: a tool of
 * another type than `function`, one without a name, one asking for `strict`
 * schema adherence, and any other tool choice.
 */
import { isRecord } from '../http.js';
import type { UpstreamRequest } from '../types.js';

export interface AnthropicTools {
  tools?: Array<Record<string, unknown>>;
  tool_choice?: Record<string, unknown>;
}

type ToolRequest = Pick<UpstreamRequest, 'tools' | 'toolChoice' | 'parallelToolCalls'>;

/** `tools` or `tool_choice` when Anthropic cannot carry it, else null. */
export function unsupportedToolField(request: ToolRequest): 'tools' | 'tool_choice' | null {
  if (request.tools === undefined) return null;
  if (!request.tools.every((tool) => toAnthropicTool(tool) !== null)) return 'tools';
  if (request.toolChoice !== undefined && toAnthropicChoice(request.toolChoice) === null) return 'tool_choice';
  return null;
}

/** The request's `tools` and `tool_choice` fields; what cannot be carried is left out (`unsupportedToolField` says so first). */
export function prepareTools(request: ToolRequest): AnthropicTools {
  if (request.tools === undefined) return {};
  const tools = request.tools.map(toAnthropicTool).filter((tool) => tool !== null);
  let choice = request.toolChoice === undefined ? null : toAnthropicChoice(request.toolChoice);
  if (request.parallelToolCalls === false && choice?.type !== 'none') {
    choice = { ...(choice ?? { type: 'auto' }), disable_parallel_tool_use: true };
  }
  return { tools, ...(choice !== null && { tool_choice: choice }) };
}

function toAnthropicTool(tool: Record<string, unknown>): Record<string, unknown> | null {
  const fn = tool.function;
  if (tool.type !== 'function' || !isRecord(fn) || typeof fn.name !== 'string' || fn.strict === true) return null;
  return {
    name: fn.name,
    ...(typeof fn.description === 'string' && { description: fn.description }),
    input_schema: isRecord(fn.parameters) ? fn.parameters : { type: 'object', properties: {} },
  };
}

function toAnthropicChoice(choice: string | Record<string, unknown>): Record<string, unknown> | null {
  switch (choice) {
    case 'auto':
      return { type: 'auto' };
    case 'required':
      return { type: 'any' };
    case 'none':
      return { type: 'none' };
  }
  if (typeof choice === 'string' || choice.type !== 'function' || !isRecord(choice.function)) return null;
  const { name } = choice.function;
  return typeof name === 'string' ? { type: 'tool', name } : null;
}
