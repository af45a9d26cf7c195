/**
 * OpenAI's conversation as Anthropic's prompt: a top-level `system` and turns
 * that alternate between user and assistant.
 *
 * - Every system message (developer messages arrive here as system), wherever
 *   it stands, goes into `system`, in order, joined by a blank line.
 * - A tool message becomes a `tool_result` block of a user turn; an assistant's
 *   tool calls become `tool_use` blocks whose input is the parsed arguments
 *   (`{}` when they are empty, not JSON or not an object: Anthropic takes only
 *   an object).
 * - Consecutive turns of one role are merged into one turn (Anthropic requires
 *   alternation), so tool results that follow each other, and a user message
 *   after them, share one user turn; within a user turn the tool results come
 *   first, as Anthropic requires.
 * - Text that is empty or only whitespace is left out (Anthropic refuses such
 *   blocks); a message left with nothing is no turn at all. A message's `name`
 *   has no place in Anthropic's format and is not sent.
 * - A `prefix` to continue is the final assistant turn (merged into one that is
 *   already last). Anthropic refuses a final assistant turn that ends in
 *   whitespace: it is cut, and `trimmedChars` says how much (see continuation.ts).
 *
 * Anthropic requires the first turn to be the user's; a conversation that
 * starts with the assistant, or has no turn besides system messages, cannot be
 * sent as it is. Nothing is made up to fill the gap: `startsWithUser` tells
 * the adapter, which reports `messages` as a field it cannot honour.
 */
import type { ChatMessage, ToolCall } from '../types.js';
import { isRecord, parseJson } from '../http.js';

export type AnthropicBlock =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }
  | { type: 'tool_result'; tool_use_id: string; content?: string };

export interface AnthropicTurn {
  role: 'user' | 'assistant';
  content: AnthropicBlock[];
}

export interface AnthropicPrompt {
  system?: string;
  messages: AnthropicTurn[];
  /** Whitespace characters cut from the end of a final assistant turn (the prefix's included). */
  trimmedChars: number;
}

export function convertMessages(messages: readonly ChatMessage[], prefix?: string): AnthropicPrompt {
  const system: string[] = [];
  const turns: AnthropicTurn[] = [];
  for (const message of messages) {
    if (message.role === 'system') {
      if (hasText(message.content)) system.push(message.content);
    } else {
      append(turns, message.role === 'assistant' ? 'assistant' : 'user', blocksOf(message));
    }
  }
  let trimmedChars = 0;
  if (prefix !== undefined) {
    const text = prefix.trimEnd();
    trimmedChars = prefix.length - text.length;
    append(turns, 'assistant', textBlocks(text));
  }
  trimmedChars += trimFinalAssistantTurn(turns);
  for (const turn of turns) if (turn.role === 'user') putToolResultsFirst(turn);
  return { ...(system.length > 0 && { system: system.join('\n\n') }), messages: turns, trimmedChars };
}

/** Whether the turns can be sent as they are: at least one, the first the user's. */
export function startsWithUser(turns: readonly AnthropicTurn[]): boolean {
  return turns[0]?.role === 'user';
}

function blocksOf(message: ChatMessage): AnthropicBlock[] {
  if (message.role === 'tool') {
    const content = hasText(message.content) ? { content: message.content } : {};
    return [{ type: 'tool_result', tool_use_id: message.toolCallId ?? '', ...content }];
  }
  const blocks = textBlocks(message.content);
  for (const call of message.toolCalls ?? []) blocks.push(toolUseBlock(call));
  return blocks;
}

function toolUseBlock(call: ToolCall): AnthropicBlock {
  const input = parseJson(call.arguments);
  return { type: 'tool_use', id: call.id, name: call.name, input: isRecord(input) ? input : {} };
}

function textBlocks(text: string): AnthropicBlock[] {
  return hasText(text) ? [{ type: 'text', text }] : [];
}

function hasText(text: string): boolean {
  return text.trim() !== '';
}

function append(turns: AnthropicTurn[], role: AnthropicTurn['role'], blocks: AnthropicBlock[]): void {
  if (blocks.length === 0) return;
  const last = turns.at(-1);
  if (last?.role === role) last.content.push(...blocks);
  else turns.push({ role, content: blocks });
}

/** Cuts the whitespace that ends a final assistant turn; how many characters. Its text never becomes empty (it had some that is not whitespace). */
function trimFinalAssistantTurn(turns: AnthropicTurn[]): number {
  const last = turns.at(-1);
  const block = last?.role === 'assistant' ? last.content.at(-1) : undefined;
  if (block?.type !== 'text') return 0;
  const text = block.text.trimEnd();
  const cut = block.text.length - text.length;
  block.text = text;
  return cut;
}

/** Tool results before anything else in a user turn; the order within each kind is kept. */
function putToolResultsFirst(turn: AnthropicTurn): void {
  const results = turn.content.filter((block) => block.type === 'tool_result');
  if (results.length === 0 || results.length === turn.content.length) return;
  turn.content = [...results, ...turn.content.filter((block) => block.type !== 'tool_result')];
}
