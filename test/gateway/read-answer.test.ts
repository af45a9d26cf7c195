/**
 * Reading an upstream's answer under the request's bounds, without HTTP: output
 * past the reservation is cut and ends with `length`, an answer past its size
 * limit is malformed, and a silent upstream is given up by the watch.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Answer, MAX_ANSWER_CHARS } from '../../src/gateway/answer.js';
import type { OpenedStream } from '../../src/gateway/failover.js';
import { OutputBudget } from '../../src/gateway/output-budget.js';
import { outputBound, readAnswer } from '../../src/gateway/read-answer.js';
import { RequestWatch } from '../../src/gateway/request-watch.js';
import { countTextTokens } from '../../src/metering/tokens.js';
import { UpstreamError, type UpstreamEvent } from '../../src/providers/types.js';

/** An opened stream of `events`; `hangAfter` events in, it waits until its signal aborts. */
function opened(events: Iterable<UpstreamEvent>, signal?: AbortSignal, hangAfter = Infinity): OpenedStream & { cancelled: () => boolean } {
  let cancelled = false;
  async function* rest(): AsyncGenerator<UpstreamEvent> {
    let sent = 0;
    for (const event of events) {
      if (sent++ === hangAfter) {
        await new Promise((_, reject) => signal!.addEventListener('abort', () => reject(new UpstreamError('aborted', 'aborted'))));
      }
      yield event;
    }
  }
  const iterator = rest();
  return { first: [], rest: iterator, cancel: () => { cancelled = true; void iterator.return(undefined); }, cancelled: () => cancelled };
}

function watch(idleMs = 60_000): RequestWatch {
  return new RequestWatch(new AbortController().signal, { remainingMs: 60_000, maxRequestMs: 60_000, idleMs });
}

async function read(stream: OpenedStream, answer: Answer, w: RequestWatch, maxOutput: number): Promise<UpstreamEvent[]> {
  const out: UpstreamEvent[] = [];
  try {
    for await (const event of readAnswer(stream, answer, w, maxOutput)) out.push(event);
  } finally {
    w.dispose();
  }
  return out;
}

function* words(count: number): Generator<UpstreamEvent> {
  for (let i = 0; i < count; i++) yield { type: 'delta', content: ' red' };
  yield { type: 'finish', finishReason: 'stop' };
}

describe('readAnswer', { timeout: 20_000 }, () => {
  it('lets a compliant answer through whole', async () => {
    const answer = new Answer();
    await read(opened(words(20)), answer, watch(), 20);
    assert.equal(answer.content, ' red'.repeat(20));
    assert.equal(answer.finishReason, 'stop');
  });

  it('cuts an upstream that ignores max_tokens at the bound, cancels it, and ends with length', async () => {
    const answer = new Answer();
    const stream = opened(words(5000));
    await read(stream, answer, watch(), 20);
    assert.equal(answer.finishReason, 'length');
    assert.equal(countTextTokens(answer.content), outputBound(20));
    assert.ok(stream.cancelled());
  });

  it('cuts a single oversized piece to the tokens that fit, and tool calls past the bound', async () => {
    const answer = new Answer();
    await read(opened([{ type: 'delta', content: ' red'.repeat(1000) }, { type: 'finish', finishReason: 'stop' }]), answer, watch(), 10);
    assert.equal(answer.content, ' red'.repeat(outputBound(10)));
    const calls = new Answer();
    await read(opened([
      { type: 'tool_call', index: 0, id: 'c1', name: 'f', arguments: '{"a": "' + 'red '.repeat(500) + '"}' },
      { type: 'finish', finishReason: 'tool_calls' },
    ]), calls, watch(), 10);
    assert.deepEqual([calls.toolCalls.length, calls.finishReason], [0, 'length']);
  });

  it('fails an answer past MAX_ANSWER_CHARS as malformed', async () => {
    const piece = ' '.repeat(1024 * 1024);
    const answer = new Answer();
    const stream = opened(Array.from({ length: 9 }, () => ({ type: 'delta' as const, content: piece })));
    await assert.rejects(read(stream, answer, watch(), 100_000_000), (err: unknown) => {
      assert.ok(err instanceof UpstreamError);
      assert.equal(err.failure, 'malformed');
      return true;
    });
    assert.ok(answer.chars > MAX_ANSWER_CHARS);
    assert.ok(stream.cancelled());
  });

  it('gives up an upstream that goes silent after its first event, and says so in its own words', async () => {
    const w = watch(100);
    const answer = new Answer();
    const stream = opened(words(10), w.signal, 1);
    await assert.rejects(read(stream, answer, w, 100), (err: unknown) => {
      assert.ok(err instanceof UpstreamError);
      const explained = w.explainMidAnswer(err);
      assert.deepEqual([explained.status, explained.code], [504, 'upstream_timeout']);
      return true;
    });
    assert.equal(w.stopped, 'idle');
    assert.equal(answer.content, ' red');
  });
});

describe('the idle clock', { timeout: 20_000 }, () => {
  it('does not count the time a slow client takes over an event against the upstream', async () => {
    const w = watch(200);
    const answer = new Answer();
    const stream = opened(words(4), w.signal);
    const out: UpstreamEvent[] = [];
    try {
      for await (const event of readAnswer(stream, answer, w, 100)) {
        out.push(event);
        await new Promise((resolve) => setTimeout(resolve, 400)); // the client drains slowly
      }
    } finally {
      w.dispose();
    }
    assert.equal(w.stopped, null);
    assert.deepEqual([answer.content, answer.finishReason], [' red'.repeat(4), 'stop']);
  });
});

describe('OutputBudget', () => {
  it('never cuts text whose pieces count more tokens than the whole', () => {
    // One character per piece: each counts a token, the whole text far fewer.
    const text = 'abcdefghij'.repeat(10);
    let sent = '';
    const budget = new OutputBudget(countTextTokens(text), () => sent);
    for (const ch of text) {
      const { event, cut } = budget.admit({ type: 'delta', content: ch });
      assert.equal(cut, false);
      sent += event?.type === 'delta' ? event.content : '';
    }
    assert.equal(sent, text);
  });
});
