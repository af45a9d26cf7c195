/**
 * Anthropic's whole answer (a `message` object) as typed values: its text
 * blocks joined, its `tool_use` blocks as tool calls, its stop reason and usage.
 * Blocks of other kinds (thinking, server tools) are not part of the answer.
 */
import { isRecord, parseJson, snippetOf } from '../http.js';
import { UpstreamError, type ToolCall, type UpstreamCompletion } from '../types.js';
import { anthropicFailure } from './anthropic-error.js';
import { toFinishReason } from './stop-reason.js';
import { mergeUsage, toTokenUsage } from './usage.js';

export function parseMessage(id: string, text: string): UpstreamCompletion {
  const body = parseJson(text);
  if (isRecord(body) && body.type === 'error') throw anthropicFailure(id, text);
  if (!isRecord(body) || !Array.isArray(body.content)) {
    throw new UpstreamError('malformed', `${id} sent no message content: ${snippetOf(text)}`);
  }
  if (typeof body.stop_reason !== 'string') {
    throw new UpstreamError('malformed', `${id} sent no stop_reason: ${snippetOf(text)}`);
  }
  let content = '';
  const toolCalls: ToolCall[] = [];
  for (const block of body.content) {
    if (!isRecord(block)) continue;
    if (block.type === 'text' && typeof block.text === 'string') content += block.text;
    else if (block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string') {
      toolCalls.push({ id: block.id, name: block.name, arguments: toolArguments(block.input) });
    }
  }
  return {
    content,
    ...(toolCalls.length > 0 && { toolCalls }),
    finishReason: toFinishReason(body.stop_reason),
    usage: toTokenUsage(mergeUsage({}, body.usage)),
  };
}

/** A tool's input as OpenAI's arguments text: `{}` for a call without arguments, never ''. */
export function toolArguments(input: unknown): string {
  return isRecord(input) ? JSON.stringify(input) : '{}';
}
