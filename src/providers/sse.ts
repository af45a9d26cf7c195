/**
 * Server-sent events, in layers: bytes → lines → events. Each layer is an async
 * generator over the one below, so a consumer that stops early stops them all
 * (and through them, the response body they read).
 *
 * The encoders at the end are what the gateway writes on its own SSE responses.
 */

export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

const LF = 0x0a;
const CR = 0x0d;

/**
 * Splits decoded bytes into lines on LF, CRLF or a lone CR. A chunk may end
 * anywhere: mid-line, between CR and LF, or inside a multi-byte UTF-8 character.
 * A last line without a line break is still yielded at the end.
 */
export async function* decodeSseLines(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8');
  let pending = '';
  for await (const chunk of chunks) {
    const { lines, rest } = takeLines(pending + decoder.decode(chunk, { stream: true }), false);
    pending = rest;
    yield* lines;
  }
  const { lines, rest } = takeLines(pending + decoder.decode(), true);
  yield* lines;
  if (rest !== '') yield rest;
}

/**
 * The complete lines in `text` and what is left after the last line break. A CR
 * at the very end stays in `rest` until `atEnd`, since an LF may follow it.
 */
export function takeLines(text: string, atEnd: boolean): { lines: string[]; rest: string } {
  const lines: string[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === LF) {
      lines.push(text.slice(start, i));
      start = i + 1;
    } else if (code === CR) {
      if (i + 1 === text.length && !atEnd) break;
      lines.push(text.slice(start, i));
      if (text.charCodeAt(i + 1) === LF) i++;
      start = i + 1;
    }
  }
  return { lines, rest: text.slice(start) };
}

/**
 * Groups lines into events as the SSE spec does: `data:` lines joined with '\n',
 * comment lines (':') skipped, an event dispatched on a blank line, and one left
 * open at the end of the stream dispatched too.
 */
export async function* decodeSseEvents(lines: AsyncIterable<string>): AsyncGenerator<SseEvent> {
  let draft = new EventDraft();
  for await (const line of lines) {
    if (line === '') {
      const event = draft.finish();
      if (event) yield event;
      draft = new EventDraft();
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
  private event: string | undefined;
  private id: string | undefined;

  add(line: string): void {
    if (line.startsWith(':')) return;
    const { field, value } = parseSseField(line);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
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
