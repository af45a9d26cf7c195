/**
 * What Anthropic's Messages API refuses, as the fake upstream checks it: the
 * headers, the fields it knows, the shape of the turns and blocks. Each check
 * answers Anthropic's own kind of message, or null when the request passes.
 */
import type { IncomingHttpHeaders } from 'node:http';

export interface Refusal {
  status: 400 | 401;
  type: 'invalid_request_error' | 'authentication_error';
  message: string;
}

/** The top-level fields the Messages API takes; any other is refused, as Anthropic does. */
const KNOWN_FIELDS = new Set([
  'model', 'messages', 'max_tokens', 'system', 'stop_sequences', 'stream', 'temperature', 'top_p', 'top_k',
  'tools', 'tool_choice', 'metadata', 'thinking', 'service_tier',
]);
const TOOL_CHOICES = new Set(['auto', 'any', 'tool', 'none']);

export function refusalOf(headers: IncomingHttpHeaders, body: Record<string, unknown>): Refusal | null {
  if (typeof headers['x-api-key'] !== 'string') {
    return { status: 401, type: 'authentication_error', message: 'x-api-key header is required' };
  }
  const message = headerProblem(headers) ?? fieldProblem(body) ?? turnsProblem(body.messages);
  return message === null ? null : { status: 400, type: 'invalid_request_error', message };
}

function headerProblem(headers: IncomingHttpHeaders): string | null {
  return typeof headers['anthropic-version'] === 'string' ? null : 'anthropic-version: header is required';
}

function fieldProblem(body: Record<string, unknown>): string | null {
  const extra = Object.keys(body).find((field) => !KNOWN_FIELDS.has(field));
  if (extra !== undefined) return `${extra}: Extra inputs are not permitted`;
  if (typeof body.model !== 'string') return 'model: Field required';
  if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1) return 'max_tokens: Field required';
  if (!inUnitRange(body.temperature)) return 'temperature: Input should be less than or equal to 1';
  if (!inUnitRange(body.top_p)) return 'top_p: Input should be less than or equal to 1';
  if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system)) return 'system: Input should be a valid list';
  const stops = body.stop_sequences;
  if (stops !== undefined && (!Array.isArray(stops) || stops.some((s) => typeof s !== 'string' || s.trim() === ''))) {
    return 'stop_sequences: each stop sequence must contain non-whitespace';
  }
  if (body.metadata !== undefined && (!isObject(body.metadata) || Object.keys(body.metadata).some((k) => k !== 'user_id'))) {
    return 'metadata: Extra inputs are not permitted';
  }
  return toolsProblem(body.tools) ?? toolChoiceProblem(body.tool_choice);
}

function inUnitRange(value: unknown): boolean {
  return value === undefined || (typeof value === 'number' && value >= 0 && value <= 1);
}

function toolsProblem(tools: unknown): string | null {
  if (tools === undefined) return null;
  if (!Array.isArray(tools)) return 'tools: Input should be a valid list';
  for (const [i, tool] of tools.entries()) {
    if (!isObject(tool) || typeof tool.name !== 'string') return `tools.${i}.name: Field required`;
    if (!isObject(tool.input_schema) || tool.input_schema.type !== 'object') return `tools.${i}.input_schema: Field required`;
    const extra = Object.keys(tool).find((field) => !['name', 'description', 'input_schema', 'cache_control'].includes(field));
    if (extra !== undefined) return `tools.${i}.${extra}: Extra inputs are not permitted`;
  }
  return null;
}

function toolChoiceProblem(choice: unknown): string | null {
  if (choice === undefined) return null;
  if (!isObject(choice) || typeof choice.type !== 'string' || !TOOL_CHOICES.has(choice.type)) return 'tool_choice: Input tag does not match';
  if (choice.type === 'tool' && typeof choice.name !== 'string') return 'tool_choice.tool.name: Field required';
  return null;
}

/** Alternating turns starting with the user's, non-empty, tool results answering the calls just before them. */
function turnsProblem(messages: unknown): string | null {
  if (!Array.isArray(messages) || messages.length === 0) return 'messages: at least one message is required';
  let calls: string[] = [];
  for (const [i, turn] of messages.entries()) {
    if (!isObject(turn) || (turn.role !== 'user' && turn.role !== 'assistant')) return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    if (i === 0 && turn.role !== 'user') return 'messages: first message must use the "user" role';
    const previous: unknown = messages[i - 1];
    if (i > 0 && isObject(previous) && previous.role === turn.role) {
      return `messages: roles must alternate between "user" and "assistant", but found multiple "${turn.role}" roles in a row`;
    }
    const blocks = typeof turn.content === 'string' ? [{ type: 'text', text: turn.content }] : turn.content;
    if (!Array.isArray(blocks) || blocks.length === 0) return `messages.${i}: all messages must have non-empty content`;
    const problem = turn.role === 'user' ? userBlocksProblem(i, blocks, calls) : assistantBlocksProblem(i, blocks, i === messages.length - 1);
    if (problem !== null) return problem;
    calls = turn.role === 'assistant' ? blocks.filter((b) => isObject(b) && b.type === 'tool_use').map((b) => String(b.id)) : [];
  }
  return null;
}

function userBlocksProblem(i: number, blocks: unknown[], calls: string[]): string | null {
  const results: string[] = [];
  let textSeen = false;
  for (const block of blocks) {
    if (!isObject(block)) return `messages.${i}.content: Input should be a valid dictionary`;
    if (block.type === 'text') {
      if (typeof block.text !== 'string' || block.text.trim() === '') return 'messages: text content blocks must contain non-whitespace text';
      textSeen = true;
    } else if (block.type === 'tool_result') {
      if (textSeen) return `messages.${i}: tool_result blocks must come first in the user message content`;
      if (!calls.includes(String(block.tool_use_id))) {
        return `messages.${i}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(block.tool_use_id)}`;
      }
      results.push(String(block.tool_use_id));
    } else {
      return `messages.${i}.content: a user turn may not hold ${String(block.type)} blocks`;
    }
  }
  const unanswered = calls.find((call) => !results.includes(call));
  if (unanswered !== undefined) {
    return `messages.${i}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${unanswered}`;
  }
  return null;
}

function assistantBlocksProblem(i: number, blocks: unknown[], final: boolean): string | null {
  for (const block of blocks) {
    if (!isObject(block)) return `messages.${i}.content: Input should be a valid dictionary`;
    if (block.type === 'text') {
      if (typeof block.text !== 'string' || block.text.trim() === '') return 'messages: text content blocks must contain non-whitespace text';
    } else if (block.type === 'tool_use') {
      if (typeof block.id !== 'string' || typeof block.name !== 'string' || !isObject(block.input)) {
        return `messages.${i}.content: tool_use needs id, name and input`;
      }
    } else {
      return `messages.${i}.content: an assistant turn may not hold ${String(block.type)} blocks`;
    }
  }
  const last = blocks.at(-1);
  if (final && isObject(last) && last.type === 'text' && typeof last.text === 'string' && last.text !== last.text.trimEnd()) {
    return 'messages: final assistant content cannot end with trailing whitespace';
  }
  return null;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
