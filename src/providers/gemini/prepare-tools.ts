/**
 * OpenAI's `tools` and `tool_choice` as Gemini's `tools` and `toolConfig`.
 *
 * - Each `{type: "function", function: {name, description, parameters}}` is a
 *   function declaration; its parameters go as `parametersJsonSchema`, which
 *   takes JSON Schema as OpenAI's callers write it (`parameters`, Gemini's
 *   OpenAPI subset, refuses keywords such as `additionalProperties`).
 * - `auto` → AUTO, `required` → ANY, `none` → NONE, one named function → ANY
 *   restricted to it by `allowedFunctionNames`.
 * - `parallel_tool_calls: false` cannot be honoured: Gemini has no switch for it.
 */
import { isRecord } from '../http.js';
import type { UpstreamRequest } from '../types.js';

export interface GeminiTools {
  tools?: Array<{ functionDeclarations: Array<Record<string, unknown>> }>;
  toolConfig?: { functionCallingConfig: { mode: 'AUTO' | 'ANY' | 'NONE'; allowedFunctionNames?: string[] } };
}

type ToolFields = Pick<UpstreamRequest, 'tools' | 'toolChoice' | 'parallelToolCalls'>;

/** The first of `tools`, `tool_choice`, `parallel_tool_calls` that Gemini cannot honour as sent, or null. */
export function unsupportedToolField(request: ToolFields): 'tools' | 'tool_choice' | 'parallel_tool_calls' | null {
  if (request.tools !== undefined && !request.tools.every((tool) => toDeclaration(tool) !== null)) return 'tools';
  if (request.toolChoice !== undefined && toCallingConfig(request.toolChoice) === null) return 'tool_choice';
  if (request.parallelToolCalls === false) return 'parallel_tool_calls';
  return null;
}

/** Gemini's tool fields, only when the request has tools (a choice among no tools says nothing). */
export function toGeminiTools(request: ToolFields): GeminiTools {
  const declarations = (request.tools ?? []).map((tool) => {
    const declaration = toDeclaration(tool);
    if (declaration === null) throw new TypeError('gemini: a tool that is not a function');
    return declaration;
  });
  if (declarations.length === 0) return {};
  const config = request.toolChoice === undefined ? null : toCallingConfig(request.toolChoice);
  if (request.toolChoice !== undefined && config === null) throw new TypeError('gemini: a tool_choice it cannot write');
  return { tools: [{ functionDeclarations: declarations }], ...(config && { toolConfig: { functionCallingConfig: config } }) };
}

function toDeclaration(tool: Record<string, unknown>): Record<string, unknown> | null {
  const fn = tool.function;
  if (tool.type !== 'function' || !isRecord(fn) || typeof fn.name !== 'string') return null;
  if (fn.description !== undefined && typeof fn.description !== 'string') return null;
  if (fn.parameters !== undefined && !isRecord(fn.parameters)) return null;
  return {
    name: fn.name,
    ...(fn.description !== undefined && { description: fn.description }),
    ...(fn.parameters !== undefined && { parametersJsonSchema: fn.parameters }),
  };
}

type CallingConfig = NonNullable<GeminiTools['toolConfig']>['functionCallingConfig'];

function toCallingConfig(choice: string | Record<string, unknown>): CallingConfig | null {
  if (choice === 'auto') return { mode: 'AUTO' };
  if (choice === 'required') return { mode: 'ANY' };
  if (choice === 'none') return { mode: 'NONE' };
  if (typeof choice === 'string') return null;
  const fn = choice.function;
  if (choice.type !== 'function' || !isRecord(fn) || typeof fn.name !== 'string') return null;
  return { mode: 'ANY', allowedFunctionNames: [fn.name] };
}
