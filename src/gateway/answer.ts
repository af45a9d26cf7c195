/** An answer assembled from a stream's events: text, tool calls, finish and usage. */
import type { FinishReason, TokenUsage, ToolCall, UpstreamEvent } from '../providers/types.js';

export class Answer {
  content = '';
  finishReason: FinishReason | null = null;
  usage: TokenUsage | null = null;
  private readonly calls: ToolCall[] = [];

  add(event: UpstreamEvent): void {
    switch (event.type) {
      case 'delta':
        this.content += event.content;
        break;
      case 'tool_call': {
        const call = (this.calls[event.index] ??= { id: '', name: '', arguments: '' });
        if (event.id) call.id = event.id;
        if (event.name) call.name += event.name;
        call.arguments += event.arguments;
        break;
      }
      case 'finish':
        this.finishReason = event.finishReason;
        break;
      case 'usage':
        this.usage = event.usage;
        break;
    }
  }

  get toolCalls(): ToolCall[] {
    return this.calls.filter((c): c is ToolCall => c !== undefined);
  }

  /** Whether anything of it could have reached a client. */
  get delivered(): boolean {
    return this.content !== '' || this.toolCalls.length > 0 || this.finishReason !== null;
  }

  /** What the gateway counts as output when the upstream reports no usage. */
  get outputText(): string {
    return [this.content, ...this.toolCalls.flatMap((c) => [c.name, c.arguments])].join('');
  }
}
