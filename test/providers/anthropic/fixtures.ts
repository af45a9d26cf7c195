/** Reading the recorded Anthropic wire fixtures, and feeding them through the SSE decoder in chunks. */
import { readFileSync } from 'node:fs';
import { decodeSse } from '../../../src/providers/sse.js';
import { LeadingWhitespace } from '../../../src/providers/anthropic/continuation.js';
import { readMessageEvents } from '../../../src/providers/anthropic/stream-events.js';
import type { UpstreamEvent } from '../../../src/providers/types.js';

export function fixture(name: string): string {
  return readFileSync(new URL(`../../fixtures/anthropic/${name}`, import.meta.url), 'utf8');
}

/** The bytes of `text`, cut at the given byte offsets. */
export async function* bytesSplitAt(text: string, ...offsets: number[]): AsyncGenerator<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let start = 0;
  for (const offset of [...offsets, bytes.length]) {
    yield bytes.slice(start, offset);
    start = offset;
  }
}

/** The events a fixture's bytes give, read in the chunks `chunks` makes of them. */
export async function eventsOf(
  chunks: AsyncIterable<Uint8Array>, leading = new LeadingWhitespace(0),
): Promise<{ events: UpstreamEvent[]; error: unknown }> {
  const events: UpstreamEvent[] = [];
  try {
    for await (const event of readMessageEvents('anthropic', decodeSse(chunks), leading)) events.push(event);
    return { events, error: null };
  } catch (error) {
    return { events, error };
  }
}
