/**
 * Reading an opened upstream stream under the request's bounds. Both modes
 * (JSON gathers, SSE forwards) read through here, so the bounds are the same.
 */
import { UpstreamError, type UpstreamEvent } from '../providers/types.js';
import { type Answer, MAX_ANSWER_CHARS } from './answer.js';
import type { OpenedStream } from './failover.js';
import { countTextTokens } from '../metering/tokens.js';
import { OutputBudget } from './output-budget.js';
import type { RequestWatch } from './request-watch.js';

/**
 * The most output the gateway lets through for a reservation of `maxOutput`
 * tokens, by its own o200k count. The upstream counts with its own tokenizer,
 * which may split the same text into somewhat more tokens: a compliant upstream
 * is never cut, and one that ignores `max_tokens` delivers at most this much
 * (and is billed for `maxOutput` at most, see meteredUsage).
 */
export function outputBound(maxOutput: number): number {
  return maxOutput + Math.ceil(maxOutput / 4) + 16;
}

/**
 * An opened stream's events as the client should see them, gathered into
 * `answer` under the request's bounds: a silent upstream fails (the watch),
 * output past the reservation's bound is cut and the answer ends with
 * `finish_reason: "length"`, and an answer past MAX_ANSWER_CHARS is malformed.
 * The upstream is cancelled on every way out.
 */
export async function* readAnswer(upstream: OpenedStream, answer: Answer, watch: RequestWatch, maxOutput: number): AsyncGenerator<UpstreamEvent> {
  // An answer continued from another route's prefix already spent part of the bound.
  const spent = answer.chars > 0 ? countTextTokens(answer.outputText, maxOutput + 1) : 0;
  const budget = new OutputBudget(outputBound(maxOutput), () => answer.outputText, spent);
  try {
    for (const pending = upstream.first.values(); ; ) {
      watch.awaitUpstream();
      const step = await nextEvent(pending, upstream.rest);
      watch.upstreamAnswered();
      if (step.done) return;
      const { event, cut } = budget.admit(step.value);
      const out = event && answer.add(event);
      if (answer.chars > MAX_ANSWER_CHARS) throw new UpstreamError('malformed', `the answer passed ${MAX_ANSWER_CHARS} characters`);
      if (out) yield out;
      if (cut) {
        answer.add({ type: 'finish', finishReason: 'length' });
        return;
      }
    }
  } finally {
    upstream.cancel();
  }
}

/** The events the failover loop already pulled, then the rest of the stream. */
async function nextEvent<T>(pending: Iterator<T>, rest: AsyncIterator<T>): Promise<IteratorResult<T>> {
  const buffered = pending.next();
  return buffered.done ? rest.next() : buffered;
}

