/**
 * `npm run bench:classifier`: what svc-auto's classifier adds to a request. Times one
 * classification (features, scores, reasons) for each held-out prompt of the corpus (the
 * typical prompts; median and 95th percentile over several rounds), then for a prompt of
 * about 100,000 tokens and for a whole 8 MiB body, whose cost the scan budgets bound.
 * Prints microseconds.
 */
import { readCorpus, split } from '../src/gateway/auto/corpus.js';
import { classifyPrompt } from '../src/gateway/auto/classifier.js';
import { BODY_LIMIT_BYTES } from '../src/http/errors.js';
import type { ChatMessage } from '../src/providers/types.js';

const ROUNDS = 20;

function microseconds(messages: ChatMessage[], times: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = process.hrtime.bigint();
    classifyPrompt(messages);
    out.push(Number(process.hrtime.bigint() - start) / 1_000);
  }
  return out;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

const { heldOut } = split(readCorpus().prompts);
// Warm-up: load the model, let the JIT compile the hot loops.
for (const p of heldOut) classifyPrompt(p.messages);

const typical = heldOut.flatMap((p) => microseconds(p.messages, ROUNDS)).sort((a, b) => a - b);
const chars = heldOut.map((p) => p.messages.reduce((n, m) => n + m.content.length, 0)).sort((a, b) => a - b);
console.log(`typical prompts: ${heldOut.length} held-out prompts × ${ROUNDS} (median ${quantile(chars, 0.5)} characters)`);
console.log(`  median ${quantile(typical, 0.5).toFixed(1)} µs, p95 ${quantile(typical, 0.95).toFixed(1)} µs, max ${typical.at(-1)?.toFixed(1)} µs`);

const sentence = 'The migration plan covers the database, the queue workers and the API servers, in that order. ';
const huge = (chars: number): ChatMessage[] => [{ role: 'user', content: sentence.repeat(Math.ceil(chars / sentence.length)) }];
for (const [name, messages] of [
  ['8,000-character prompt (what is scanned of a longer one)', huge(8_000)],
  ['100,000-token prompt (400,000 characters)', huge(400_000)],
  ['8 MiB prompt (the body limit)', huge(BODY_LIMIT_BYTES)],
] as const) {
  const times = microseconds(messages, ROUNDS).sort((a, b) => a - b);
  console.log(`${name}: median ${quantile(times, 0.5).toFixed(1)} µs, max ${times.at(-1)?.toFixed(1)} µs`);
}
