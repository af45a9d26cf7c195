/**
 * A provider without a network: the reply is a function of the model and the
 * messages, its usage is counted the way OpenAI counts. For demos, tests and
 * benchmarks of the gateway itself.
 */
import { createHash } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { decode } from 'gpt-tokenizer';
import { countPromptTokens, countTextTokens, encodeText } from '../metering/tokens.js';
import {
  UpstreamError,
  type AttemptContext,
  type ProviderAdapter,
  type UpstreamCompletion,
  type UpstreamEvent,
  type UpstreamRequest,
} from './types.js';

const WORDS = [
  'the', 'gateway', 'routes', 'each', 'request', 'to', 'a', 'model', 'that', 'answers',
  'with', 'care', 'credits', 'are', 'reserved', 'before', 'and', 'settled', 'after', 'call',
  'tokens', 'flow', 'through', 'stream', 'quietly', 'every', 'reply', 'is', 'measured', 'in',
  'small', 'steps', 'simulated', 'text', 'reads', 'like', 'plain', 'prose', 'for', 'testing',
  'latency', 'stays', 'low', 'while', 'ledger', 'keeps', 'its', 'balance', 'honest', 'today',
];
const MIN_TOKENS = 20;
const MAX_TOKENS = 120;
const TOKENS_PER_PIECE = 3;

export function createSimulatorAdapter(id = 'simulator'): ProviderAdapter {
  return {
    id,
    // It answers in plain text only: a request for tools or JSON output goes to a route that can honour it.
    unsupported: (request) => {
      if (request.tools !== undefined) return 'tools';
      if (request.responseFormat !== undefined && request.responseFormat.type !== 'text') return 'response_format';
      return null;
    },
    continues: () => false,
    async complete(request: UpstreamRequest, ctx: AttemptContext): Promise<UpstreamCompletion> {
      throwIfAborted(ctx.signal, id);
      ctx.onFirstByte();
      return simulate(request);
    },
    async *stream(request: UpstreamRequest, ctx: AttemptContext): AsyncGenerator<UpstreamEvent> {
      const completion = simulate(request);
      const tokens = encodeText(completion.content);
      for (let start = 0; start < tokens.length; start += TOKENS_PER_PIECE) {
        await nextTurn();
        throwIfAborted(ctx.signal, id);
        yield { type: 'delta', content: decode(tokens.slice(start, start + TOKENS_PER_PIECE)) };
      }
      await nextTurn();
      throwIfAborted(ctx.signal, id);
      yield { type: 'finish', finishReason: completion.finishReason };
      if (completion.usage) yield { type: 'usage', usage: completion.usage };
    },
  };
}

/** The whole completion for `request`, cut to its `maxTokens`. */
export function simulate(request: UpstreamRequest): UpstreamCompletion {
  const full = composeReply(request);
  const cut = cutToTokens(full, Math.max(0, request.maxTokens));
  return {
    content: cut,
    finishReason: cut === full ? 'stop' : 'length',
    usage: { promptTokens: countPromptTokens(request.messages), completionTokens: countTextTokens(cut) },
  };
}

/** Sentences from the word list, as long as the seed says (20 to 120 tokens). */
function composeReply(request: UpstreamRequest): string {
  const next = seededRandom(request);
  const targetTokens = MIN_TOKENS + Math.floor(next() * (MAX_TOKENS - MIN_TOKENS + 1));
  // Says what it is, so that nobody mistakes it for a model's answer.
  let reply = `(Simulated reply from ${request.model}.)`;
  while (countTextTokens(reply) < targetTokens) {
    reply += ` ${sentence(next)}`;
  }
  return reply;
}

function sentence(next: () => number): string {
  const length = 5 + Math.floor(next() * 8);
  const words = Array.from({ length }, () => WORDS[Math.floor(next() * WORDS.length)] ?? 'text');
  const text = words.join(' ');
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
}

/** The longest prefix of `text` that counts as at most `maxTokens` tokens. */
function cutToTokens(text: string, maxTokens: number): string {
  const tokens = encodeText(text);
  if (tokens.length <= maxTokens) return text;
  let keep = maxTokens;
  let prefix = decode(tokens.slice(0, keep));
  while (keep > 0 && countTextTokens(prefix) > maxTokens) {
    keep--;
    prefix = decode(tokens.slice(0, keep));
  }
  return prefix;
}

/** Numbers in [0, 1) from the sha256 of the model and the messages. */
function seededRandom(request: UpstreamRequest): () => number {
  const hash = createHash('sha256').update(request.model);
  for (const message of request.messages) hash.update(`\0${message.role}\0${message.content}`);
  const digest = hash.digest();
  let state = digest.readUInt32LE(0) ^ digest.readUInt32LE(4);
  // mulberry32: small, fast, and the same on every machine.
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function throwIfAborted(signal: AbortSignal, id: string): void {
  if (signal.aborted) throw new UpstreamError('aborted', `${id}: attempt aborted`, { cause: signal.reason });
}
