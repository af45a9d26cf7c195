/**
 * A Gemini answer as the gateway's events, whether it came as one JSON
 * response or as a stream of them: text deltas and tool calls in order, one
 * `finish`, then the usage (the last report: Gemini repeats it, cumulative, in
 * every chunk). A stream is read to its end, since Gemini sends no end marker;
 * what comes after the finish is only its usage.
 *
 * Gemini gives function calls no ids (unless it gives `functionCall.id`), so
 * each one gets a fresh `call_…`: when the caller sends the call back with its
 * result, the call's name is found by that id in the conversation itself.
 */
import { randomBase62 } from '../../ids.js';
import { parseJson } from '../http.js';
import { decodeSse } from '../sse.js';
import { UpstreamError, type TokenUsage, type ToolCall, type UpstreamCompletion, type UpstreamEvent } from '../types.js';
import { BLOCKED_PROMPT_FINISH, toFinishReason } from './finish-reason.js';
import { parseResponse, type GeminiResponse } from './parse-response.js';

export class GeminiAnswerReader {
  private calls = 0;
  private delivered = false;
  private finishSent = false;
  private usage: TokenUsage | null = null;

  constructor(
    private readonly id: string,
    private readonly newCallId: () => string = () => `call_${randomBase62(24)}`,
  ) {}

  get finished(): boolean {
    return this.finishSent;
  }

  /** The events of one response (or chunk); throws 'malformed' when it is broken or says the route failed. */
  push(value: unknown, raw: string): UpstreamEvent[] {
    const response = parseResponse(this.id, value, raw);
    this.usage = response.usage ?? this.usage;
    return this.finishSent ? [] : this.eventsOf(response);
  }

  /** The usage event, once the answer is whole; 'connection' when it ended before a finish reason. */
  end(): UpstreamEvent[] {
    if (!this.finishSent) throw new UpstreamError('connection', `${this.id}: stream ended early`);
    return this.usage ? [{ type: 'usage', usage: this.usage }] : [];
  }

  private eventsOf(response: GeminiResponse): UpstreamEvent[] {
    const events: UpstreamEvent[] = [];
    for (const piece of response.pieces) {
      this.delivered = true;
      if (piece.kind === 'text') {
        events.push({ type: 'delta', content: piece.text });
      } else {
        events.push({ type: 'tool_call', index: this.calls++, id: piece.id ?? this.newCallId(), name: piece.name, arguments: piece.arguments });
      }
    }
    const reason = response.blockReason !== null
      ? BLOCKED_PROMPT_FINISH
      : response.finishReason !== null
        ? toFinishReason(this.id, response.finishReason, { calledTool: this.calls > 0, delivered: this.delivered })
        : null;
    if (reason !== null) {
      this.finishSent = true;
      events.push({ type: 'finish', finishReason: reason });
    }
    return events;
  }
}

/** The events of an SSE stream of responses (`streamGenerateContent?alt=sse`). */
export async function* readStreamEvents(id: string, chunks: AsyncIterable<Uint8Array>, newCallId?: () => string): AsyncGenerator<UpstreamEvent> {
  const reader = new GeminiAnswerReader(id, newCallId);
  for await (const event of decodeSse(chunks)) {
    if (event.data === '') continue;
    yield* reader.push(parseJson(event.data), event.data);
  }
  yield* reader.end();
}

/**
 * The events of an answer sent as JSON: one response (`generateContent`), or
 * the list of them that `streamGenerateContent` sends without `alt=sse`.
 * 'malformed' when it does not finish.
 */
export function jsonAnswerEvents(id: string, text: string, newCallId?: () => string): UpstreamEvent[] {
  const value = parseJson(text);
  const reader = new GeminiAnswerReader(id, newCallId);
  const events = (Array.isArray(value) ? value : [value]).flatMap((response) => reader.push(response, text));
  if (!reader.finished) throw new UpstreamError('malformed', `${id} sent an answer without a finish reason`);
  return [...events, ...reader.end()];
}

/** A whole answer's events as one completion. */
export function toCompletion(events: readonly UpstreamEvent[]): UpstreamCompletion {
  let content = '';
  const toolCalls: ToolCall[] = [];
  let finishReason: UpstreamCompletion['finishReason'] = 'stop';
  let usage: TokenUsage | null = null;
  for (const event of events) {
    if (event.type === 'delta') content += event.content;
    else if (event.type === 'tool_call') toolCalls.push({ id: event.id ?? '', name: event.name ?? '', arguments: event.arguments });
    else if (event.type === 'finish') finishReason = event.finishReason;
    else usage = event.usage;
  }
  return { content, ...(toolCalls.length > 0 && { toolCalls }), finishReason, usage };
}
