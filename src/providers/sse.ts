/**
 * Server-sent events, in layers: bytes → lines → events. Each layer is an async
 * generator over the one below, so a consumer that stops early stops them all
 * (and through them, the response body they read).
 *
 * Every buffer an upstream fills here is bounded: one line, and one event's
 * data, each at most `SSE_LIMITS` characters; past that the stream fails with
 * `SseLimitError`. Each byte is scanned once, so a huge line costs linear time.
 *
 * The encoders at the end are what the gateway writes on its own SSE responses.
 */

export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

/** The most characters one line, and one event's joined data, may hold. */
export const SSE_LIMITS = { lineChars: 1024 * 1024, eventChars: 1024 * 1024 };

/** A line or an event outgrew its limit: the stream is malformed (or hostile). */
export class SseLimitError extends Error {
  override name = 'SseLimitError';
  constructor(what: 'line' | 'event', limit: number) {
    super(`an SSE ${what} longer than ${limit} characters`);
  }
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits decoded bytes into lines on LF, CRLF or a lone CR. A chunk may end
 * anywhere: mid-line, between CR and LF, or inside a multi-byte UTF-8 character.
 * A last line without a line break is still yielded at the end.
 */
export async function* decodeSseLines(chunks: AsyncIterable<Uint8Array>, maxLineChars = SSE_LIMITS.lineChars): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8');
  const splitter = new LineSplitter(maxLineChars);
  for await (const chunk of chunks) yield* splitter.push(decoder.decode(chunk, { stream: true }));
  yield* splitter.push(decoder.decode());
  yield* splitter.end();
}

/**
 * Line splitting that remembers only the unfinished line, as pieces: each
 * pushed text is scanned once, whatever came before it, so a line that arrives
 * in many small chunks costs linear time. A CR at the end of one text waits
 * for the next, since an LF may follow it.
 */
export class LineSplitter {
  private pieces: string[] = [];
  private pending = 0;
  private afterCr = false;

  constructor(private readonly maxLineChars = SSE_LIMITS.lineChars) {}

  /** The lines that `text` completes. */
  push(text: string): string[] {
    const lines: string[] = [];
    let start = 0;
    if (this.afterCr && text.length > 0) {
      this.afterCr = false;
      if (text.charCodeAt(0) === LF) start = 1;
    }
    for (let i = start; i < text.length; i++) {
      const code = text.charCodeAt(i);
      if (code !== LF && code !== CR) continue;
      lines.push(this.finishLine(text.slice(start, i)));
      if (code === CR) {
        if (i + 1 === text.length) this.afterCr = true;
        else if (text.charCodeAt(i + 1) === LF) i++;
      }
      start = i + 1;
    }
    this.hold(text.slice(start));
    return lines;
  }

  /** The last line, if it had no line break after it. */
  end(): string[] {
    if (this.pending === 0 && this.pieces.length === 0) return [];
    return [this.finishLine('')];
  }

  private hold(piece: string): void {
    if (piece === '') return;
    this.pending += piece.length;
    if (this.pending > this.maxLineChars) throw new SseLimitError('line', this.maxLineChars);
    this.pieces.push(piece);
  }

  private finishLine(last: string): string {
    if (this.pending + last.length > this.maxLineChars) throw new SseLimitError('line', this.maxLineChars);
    const line = this.pieces.length === 0 ? last : this.pieces.join('') + last;
    this.pieces = [];
    this.pending = 0;
    return line;
  }
}

/**
 * Groups lines into events as the SSE spec does: `data:` lines joined with '\n',
 * comment lines (':') skipped, an event dispatched on a blank line, and one left
 * open at the end of the stream dispatched too.
 */
export async function* decodeSseEvents(lines: AsyncIterable<string>, maxEventChars = SSE_LIMITS.eventChars): AsyncGenerator<SseEvent> {
  let draft = new EventDraft(maxEventChars);
  for await (const line of lines) {
    if (line === '') {
      const event = draft.finish();
      if (event) yield event;
      draft = new EventDraft(maxEventChars);
    } else {
      draft.add(line);
    }
  }
  const last = draft.finish();
  if (last) yield last;
}

/** Bytes straight to events. */
export function decodeSse(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  return decodeSseEvents(decodeSseLines(chunks));
}

/** Splits `field: value` (one space after the colon is not part of the value). */
export function parseSseField(line: string): { field: string; value: string } {
  const colon = line.indexOf(':');
  if (colon === -1) return { field: line, value: '' };
  const value = line.slice(colon + 1);
  return { field: line.slice(0, colon), value: value.startsWith(' ') ? value.slice(1) : value };
}

class EventDraft {
  private readonly data: string[] = [];
  private dataChars = 0;
  private event: string | undefined;
  private id: string | undefined;

  constructor(private readonly maxChars: number) {}

  add(line: string): void {
    if (line.startsWith(':')) return;
    const { field, value } = parseSseField(line);
    if (field === 'data') {
      this.dataChars += value.length + 1;
      if (this.dataChars > this.maxChars) throw new SseLimitError('event', this.maxChars);
      this.data.push(value);
    } else if (field === 'event') this.event = value;
    else if (field === 'id' && !value.includes('\0')) this.id = value;
  }

  /** The event, or null when the lines carried neither data nor an event name. */
  finish(): SseEvent | null {
    if (this.data.length === 0 && this.event === undefined) return null;
    const event: SseEvent = { data: this.data.join('\n') };
    if (this.event !== undefined) event.event = this.event;
    if (this.id !== undefined) event.id = this.id;
    return event;
  }
}

/** The stream's end marker in the OpenAI convention. */
export const SSE_DONE = 'data: [DONE]\n\n';

/** One `data:` event carrying `value` as JSON (which never holds a raw line break). */
export function encodeSseData(value: unknown): string {
  return `data: ${JSON.stringify(value) ?? 'null'}\n\n`;
}

/** A comment event, e.g. `: ping`, that clients ignore; keeps a connection alive. */
export function encodeSseComment(text: string): string {
  const lines = text.split(/\r\n|\r|\n/).map((line) => `: ${line}\n`);
  return `${lines.join('')}\n`;
}
