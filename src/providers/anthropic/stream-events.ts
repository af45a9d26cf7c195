/**
 * Anthropic's stream (`message_start`, `content_block_start`/`_delta`/`_stop`,
 * `message_delta`, `message_stop`, `ping`, `error`) as the gateway's events.
 *
 * - `text_delta` → a delta. Blocks of other kinds (thinking, server tools) are skipped.
 * - A `tool_use` block → tool-call pieces: its start carries our own running
 *   index among the answer's tool calls, the id and the name; each
 *   `input_json_delta.partial_json` is a piece of the arguments. A call whose
 *   arguments never came (a tool without parameters) gets `{}` when its block
 *   stops, never ''.
 * - `message_delta`'s stop reason → the finish, once; usage is cumulative
 *   (usage.ts) and comes once, after the finish, when the message stops.
 * - `ping` and events not known here are skipped.
 * - An `error` event fails the route as the status Anthropic gives that error
 *   (anthropic-error.ts): `overloaded_error` as 529.
 * - `message_stop` ends the answer even if the upstream keeps the body open;
 *   a stream that ends without it was cut ('connection').
 */
import { isCount, isRecord, parseJson, snippetOf } from '../http.js';
import type { SseEvent } from '../sse.js';
import { UpstreamError, type UpstreamEvent } from '../types.js';
import { anthropicFailure } from './anthropic-error.js';
import { LeadingWhitespace } from './continuation.js';
import { toolArguments } from './response.js';
import { toFinishReason } from './stop-reason.js';
import { mergeUsage, toTokenUsage, type UsageCounts } from './usage.js';

export async function* readMessageEvents(
  id: string, events: AsyncIterable<SseEvent>, leading = new LeadingWhitespace(0),
): AsyncGenerator<UpstreamEvent> {
  const reader = new MessageReader(id, leading);
  // Leaving the loop at `message_stop` must not destroy the body: the caller lets its connection go back to the pool.
  for await (const event of events) {
    yield* reader.take(event);
    if (reader.stopped) break;
  }
  if (!reader.stopped) throw new UpstreamError('connection', `${id}: stream ended early`);
  const usage = toTokenUsage(reader.usage);
  if (usage) yield { type: 'usage', usage };
}

type Block = { kind: 'text' } | { kind: 'tool'; index: number; hasArguments: boolean };

class MessageReader {
  stopped = false;
  readonly usage: UsageCounts = {};
  private finished = false;
  private readonly blocks = new Map<number, Block>();
  private calls = 0;

  constructor(private readonly id: string, private readonly leading: LeadingWhitespace) {}

  take(event: SseEvent): UpstreamEvent[] {
    const data = parseJson(event.data);
    if (event.event === 'error' || (isRecord(data) && data.type === 'error')) throw anthropicFailure(this.id, event.data);
    if (!isRecord(data)) throw this.malformed(event.data);
    switch (typeof data.type === 'string' ? data.type : event.event) {
      case 'message_start':
        mergeUsage(this.usage, isRecord(data.message) ? data.message.usage : undefined);
        return [];
      case 'content_block_start':
        return this.startBlock(data);
      case 'content_block_delta':
        return this.blockDelta(data);
      case 'content_block_stop':
        return isCount(data.index) ? this.stopBlock(data.index) : [];
      case 'message_delta':
        mergeUsage(this.usage, data.usage);
        return isRecord(data.delta) && typeof data.delta.stop_reason === 'string' ? this.finish(data.delta.stop_reason) : [];
      case 'message_stop':
        this.stopped = true;
        return [...[...this.blocks.keys()].flatMap((index) => this.stopBlock(index)), ...this.finish('end_turn')];
      default:
        return [];
    }
  }

  private startBlock(data: Record<string, unknown>): UpstreamEvent[] {
    const block = data.content_block;
    if (!isCount(data.index) || !isRecord(block)) throw this.malformed(JSON.stringify(data));
    if (block.type === 'text') {
      this.blocks.set(data.index, { kind: 'text' });
      return typeof block.text === 'string' ? this.text(block.text) : [];
    }
    if (block.type !== 'tool_use') return [];
    if (typeof block.id !== 'string' || typeof block.name !== 'string') throw this.malformed(JSON.stringify(data));
    // The input is `{}` at the start of a streamed call; should one come whole, it is the arguments.
    const whole = isRecord(block.input) && Object.keys(block.input).length > 0;
    const index = this.calls++;
    this.blocks.set(data.index, { kind: 'tool', index, hasArguments: whole });
    return [{ type: 'tool_call', index, id: block.id, name: block.name, arguments: whole ? toolArguments(block.input) : '' }];
  }

  private blockDelta(data: Record<string, unknown>): UpstreamEvent[] {
    const { delta } = data;
    if (!isCount(data.index) || !isRecord(delta)) throw this.malformed(JSON.stringify(data));
    const block = this.blocks.get(data.index);
    if (delta.type === 'text_delta' && block?.kind !== 'tool' && typeof delta.text === 'string') return this.text(delta.text);
    if (delta.type !== 'input_json_delta' || block?.kind !== 'tool' || typeof delta.partial_json !== 'string') return [];
    if (delta.partial_json === '') return [];
    block.hasArguments = true;
    return [{ type: 'tool_call', index: block.index, arguments: delta.partial_json }];
  }

  private stopBlock(blockIndex: number): UpstreamEvent[] {
    const block = this.blocks.get(blockIndex);
    this.blocks.delete(blockIndex);
    if (block?.kind !== 'tool' || block.hasArguments) return [];
    return [{ type: 'tool_call', index: block.index, arguments: '{}' }];
  }

  private text(text: string): UpstreamEvent[] {
    const content = this.leading.take(text);
    return content === '' ? [] : [{ type: 'delta', content }];
  }

  private finish(reason: string): UpstreamEvent[] {
    if (this.finished) return [];
    this.finished = true;
    return [{ type: 'finish', finishReason: toFinishReason(reason) }];
  }

  private malformed(data: string): UpstreamError {
    return new UpstreamError('malformed', `${this.id} sent an event that cannot be read: ${snippetOf(data)}`);
  }
}
