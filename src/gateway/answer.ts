/**
 * An answer assembled from a stream's events: text, tool calls, finish and
 * usage. Tool calls are renumbered 0, 1, 2… in the order they first appear,
 * and each one's first piece carries its id (the upstream's, or one made here)
 * and name, so that what the client sees is well formed whatever the upstream sent.
 */
import { randomBase62 } from '../ids.js';
import type { FinishReason, TokenUsage, ToolCall, UpstreamEvent } from '../providers/types.js';

/** More calls than this in one answer are dropped: an upstream cannot make the gateway hoard. */
const MAX_TOOL_CALLS = 128;
/** The most characters of text and tool-call arguments one answer may gather; past it the route failed (malformed). */
export const MAX_ANSWER_CHARS = 8 * 1024 * 1024;

export class Answer {
  content = '';
  /** Characters gathered: text, tool names and arguments. */
  chars = 0;
  finishReason: FinishReason | null = null;
  usage: TokenUsage | null = null;
  private readonly calls: ToolCall[] = [];
  private readonly ours = new Map<number, number>();

  /** Takes an event in; returns it as the client should see it, or null when it is dropped. */
  add(event: UpstreamEvent): UpstreamEvent | null {
    switch (event.type) {
      case 'delta':
        this.content += event.content;
        this.chars += event.content.length;
        return event;
      case 'tool_call':
        return this.addToolCall(event);
      case 'finish':
        this.finishReason = event.finishReason;
        return event;
      case 'usage':
        this.usage = event.usage;
        return event;
    }
  }

  get toolCalls(): ToolCall[] {
    return this.calls;
  }

  /** Whether anything of it could have reached a client. */
  get delivered(): boolean {
    return this.content !== '' || this.calls.length > 0 || this.finishReason !== null;
  }

  /** What the gateway counts as output when the upstream reports no usage. */
  get outputText(): string {
    return [this.content, ...this.calls.flatMap((c) => [c.name, c.arguments])].join('');
  }

  private addToolCall(event: Extract<UpstreamEvent, { type: 'tool_call' }>): UpstreamEvent | null {
    this.chars += (event.name?.length ?? 0) + event.arguments.length;
    const index = this.ours.get(event.index);
    if (index === undefined) {
      if (this.calls.length >= MAX_TOOL_CALLS) return null;
      const call = { id: event.id || `call_${randomBase62(24)}`, name: event.name ?? '', arguments: event.arguments };
      this.ours.set(event.index, this.calls.length);
      this.calls.push(call);
      return { type: 'tool_call', index: this.calls.length - 1, id: call.id, name: call.name, arguments: event.arguments };
    }
    const call = this.calls[index]!;
    // A name sent again replaces (as OpenAI's SDK reads it), never doubles.
    if (event.name) call.name = event.name;
    call.arguments += event.arguments;
    return { type: 'tool_call', index, arguments: event.arguments };
  }
}
