import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  SSE_DONE,
  decodeSse,
  decodeSseEvents,
  decodeSseLines,
  encodeSseComment,
  encodeSseData,
  parseSseField,
  LineSplitter,
  SseLimitError,
  type SseEvent,
} from '../../src/providers/sse.js';

const utf8 = new TextEncoder();

/** The text as bytes, cut at the given byte offsets. */
async function* bytesSplitAt(text: string, ...offsets: number[]): AsyncGenerator<Uint8Array> {
  const bytes = utf8.encode(text);
  let start = 0;
  for (const offset of [...offsets, bytes.length]) {
    yield bytes.slice(start, offset);
    start = offset;
  }
}

/** Each string as its own chunk of bytes. */
async function* chunks(...parts: string[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield utf8.encode(part);
}

async function* lines(...items: string[]): AsyncGenerator<string> {
  yield* items;
}

async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of source) items.push(item);
  return items;
}

describe('decodeSseLines', () => {
  it('joins a line split across chunks', async () => {
    assert.deepEqual(await collect(decodeSseLines(chunks('data: hel', 'lo\n', '\n'))), ['data: hello', '']);
  });

  it('joins a multi-byte UTF-8 character split across chunks', async () => {
    const text = 'data: héllo 😀\n\n';
    const insideEmoji = utf8.encode('data: héllo ').length + 2;
    const insideE = utf8.encode('data: h').length + 1;
    const decoded = await collect(decodeSseLines(bytesSplitAt(text, insideE, insideEmoji)));
    assert.deepEqual(decoded, ['data: héllo 😀', '']);
  });

  it('splits on CRLF, CR and LF, even with CR and LF in different chunks', async () => {
    const decoded = await collect(decodeSseLines(chunks('a\r\nb\rc\nd\r', '\ne\r', 'f')));
    assert.deepEqual(decoded, ['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('yields a last line without a line break, and a trailing CR ends a line', async () => {
    assert.deepEqual(await collect(decodeSseLines(chunks('x\n', 'data: end'))), ['x', 'data: end']);
    assert.deepEqual(await collect(decodeSseLines(chunks('one\r'))), ['one']);
  });

  it('yields nothing for an empty body', async () => {
    assert.deepEqual(await collect(decodeSseLines(chunks())), []);
  });
});

describe('LineSplitter', () => {
  it('ends a line at a trailing CR and swallows the LF that may follow in the next text', () => {
    const splitter = new LineSplitter();
    assert.deepEqual(splitter.push('a\nb\r'), ['a', 'b']);
    assert.deepEqual(splitter.push('\nc'), []);
    assert.deepEqual(splitter.push('\r\r\n'), ['c', '']);
    assert.deepEqual(splitter.end(), []);
  });

  it('joins a line that arrives in many pieces', () => {
    const splitter = new LineSplitter();
    for (const piece of ['da', 'ta', ': ', 'x']) assert.deepEqual(splitter.push(piece), []);
    assert.deepEqual(splitter.push('y\n'), ['data: xy']);
  });

  it('refuses a line past its limit, whether it arrives whole or in pieces', () => {
    assert.throws(() => new LineSplitter(8).push('123456789\n'), SseLimitError);
    const splitter = new LineSplitter(8);
    splitter.push('12345');
    assert.throws(() => splitter.push('6789'), SseLimitError);
    assert.deepEqual(new LineSplitter(8).push('12345678\n'), ['12345678']);
  });
});

describe('SSE limits', { timeout: 10_000 }, () => {
  it('reads one 8 MB line sent in 16 KB pieces in linear time, then refuses it past the line limit', async () => {
    // Quadratic splitting (rescanning the pending text on every chunk) took 11 s of CPU here; the runner's timeout catches it.
    async function* huge(): AsyncGenerator<Uint8Array> {
      const piece = utf8.encode('x'.repeat(16 * 1024));
      yield utf8.encode('data: ');
      for (let i = 0; i < 512; i++) yield piece;
      yield utf8.encode('\n\n');
    }
    const lines = decodeSseLines(huge(), 16 * 1024 * 1024);
    const first = await lines.next();
    assert.equal(first.value?.length, 6 + 8 * 1024 * 1024);
    await assert.rejects(collect(decodeSse(huge())), SseLimitError);
  });

  it('refuses an event whose data lines together pass the event limit', async () => {
    await assert.rejects(collect(decodeSseEvents(lines('data: 12345', 'data: 67890', ''), 10)), SseLimitError);
    assert.deepEqual(await collect(decodeSseEvents(lines('data: 1234', 'data: 5678', ''), 10)), [{ data: '1234\n5678' }]);
  });
});

describe('parseSseField', () => {
  it('drops one space after the colon, not more', () => {
    assert.deepEqual(parseSseField('data: x'), { field: 'data', value: 'x' });
    assert.deepEqual(parseSseField('data:  x'), { field: 'data', value: ' x' });
    assert.deepEqual(parseSseField('data:x:y'), { field: 'data', value: 'x:y' });
    assert.deepEqual(parseSseField('data'), { field: 'data', value: '' });
  });
});

describe('decodeSseEvents', () => {
  it('dispatches an event on a blank line', async () => {
    const events = await collect(decodeSseEvents(lines('data: {"a":1}', '', 'data: [DONE]', '')));
    assert.deepEqual(events, [{ data: '{"a":1}' }, { data: '[DONE]' }]);
  });

  it('ignores comment lines', async () => {
    const events = await collect(decodeSseEvents(lines(': ping', '', 'data: x', ': between', '')));
    assert.deepEqual(events, [{ data: 'x' }]);
  });

  it('joins multi-line data with \\n', async () => {
    const events = await collect(decodeSseEvents(lines('data: first', 'data: second', 'data:', '')));
    assert.deepEqual(events, [{ data: 'first\nsecond\n' }]);
  });

  it('keeps the event and id fields, ignores retry and unknown fields', async () => {
    const events = await collect(
      decodeSseEvents(lines('event: error', 'id: 7', 'retry: 1000', 'foo: bar', 'data: {"error":{}}', '')),
    );
    assert.deepEqual(events, [{ event: 'error', id: '7', data: '{"error":{}}' }]);
  });

  it('dispatches a trailing event without a blank line at the end', async () => {
    assert.deepEqual(await collect(decodeSseEvents(lines('data: a', '', 'data: b'))), [{ data: 'a' }, { data: 'b' }]);
  });

  it('dispatches nothing for blank lines alone', async () => {
    assert.deepEqual(await collect(decodeSseEvents(lines('', '', ''))), []);
  });
});

describe('decodeSse (bytes to events)', () => {
  it('decodes an OpenAI stream cut at awkward places', async () => {
    const body =
      ': OPENROUTER PROCESSING\r\n\r\n' +
      'data: {"choices":[{"delta":{"content":"Grüße"}}]}\r\n\r\n' +
      'data: {"choices":[],"usage":{"prompt_tokens":1}}\r\n\r\n' +
      'data: [DONE]\r\n\r\n';
    const offsets = [3, 30, utf8.encode(body).indexOf(0xc3) + 1, 100, 101, 150];
    const events: SseEvent[] = await collect(decodeSse(bytesSplitAt(body, ...offsets)));
    assert.deepEqual(
      events.map((event) => event.data),
      ['{"choices":[{"delta":{"content":"Grüße"}}]}', '{"choices":[],"usage":{"prompt_tokens":1}}', '[DONE]'],
    );
  });

  it('decodes the same events whatever the chunking', async () => {
    const body = 'event: a\ndata: 1\n\ndata: 2\ndata: 3\n\n: c\ndata: é\n\n';
    const whole = await collect(decodeSse(chunks(body)));
    const byteByByte = await collect(
      decodeSse(bytesSplitAt(body, ...Array.from({ length: utf8.encode(body).length - 1 }, (_, i) => i + 1))),
    );
    assert.deepEqual(byteByByte, whole);
    assert.deepEqual(whole, [{ event: 'a', data: '1' }, { data: '2\n3' }, { data: 'é' }]);
  });

  it('stops reading the source when the consumer stops', async () => {
    let finished = false;
    async function* source(): AsyncGenerator<Uint8Array> {
      try {
        yield utf8.encode('data: 1\n\ndata: 2\n\n');
        yield utf8.encode('data: 3\n\n');
      } finally {
        finished = true;
      }
    }
    for await (const event of decodeSse(source())) {
      assert.equal(event.data, '1');
      break;
    }
    assert.equal(finished, true);
  });
});

describe('encoders', () => {
  it('encodes data as one JSON line', () => {
    assert.equal(encodeSseData({ text: 'a\nb' }), 'data: {"text":"a\\nb"}\n\n');
    assert.equal(SSE_DONE, 'data: [DONE]\n\n');
  });

  it('encodes a comment, one prefix per line', () => {
    assert.equal(encodeSseComment('ping'), ': ping\n\n');
    assert.equal(encodeSseComment('a\nb'), ': a\n: b\n\n');
  });

  it('round-trips through the decoder; comments vanish', async () => {
    const body = encodeSseComment('ping') + encodeSseData({ n: 1 }) + SSE_DONE;
    const events = await collect(decodeSse(chunks(body)));
    assert.deepEqual(events, [{ data: '{"n":1}' }, { data: '[DONE]' }]);
  });
});
