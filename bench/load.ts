/**
 * The bench's load generator, in a process of its own so that its CPU is
 * neither the gateway's nor the mock's. One scenario per run, given as JSON in
 * argv[2]; prints one JSON line of results. Latencies are taken with hrtime
 * (a tool that rounds to whole milliseconds cannot see a 0.3 ms hop).
 *   json:   `connections` loops of non-streaming requests for `durationMs`
 *   stream: the same with `stream: true`, timing the first content token too
 *   hold:   `connections` streams opened at once and held until they finish
 */
import { Agent, request } from 'undici';

export interface LoadSpec {
  mode: 'json' | 'stream' | 'hold';
  url: string;
  key: string;
  model: string;
  connections: number;
  durationMs: number;
  /** The user message: a 1 KB request, 99,800 tokens (o200k) of prose, or a short ask for a story. */
  prompt: 'short' | 'huge' | 'story';
  /** hold: open the streams evenly over this long, as traffic ramps up, not in one SYN flood. */
  rampMs?: number;
  /** With `requests`, stop after that many (per run, not per connection). */
  requests?: number;
}

export interface LoadResult {
  requests: number;
  errors: number;
  firstError: string | null;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  ttftP50: number | null;
  ttftP99: number | null;
}

const CONTENT = /"content":"[^"]/;

const PROMPTS = {
  short: () => `Summarize the benefits of connection pooling for a web service in two sentences. ${'Context: '.padEnd(900, 'lorem ipsum dolor sit amet ')}`,
  huge: () => Array.from({ length: 8_400 }, (_, i) => `Sentence ${i} tells about ships, rivers and weather.`).join(' '),
  story: () => 'Tell me a long story.',
};

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function ms(since: bigint): number {
  return Number(process.hrtime.bigint() - since) / 1e6;
}

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const stream = spec.mode !== 'json';
  const agent = new Agent({ connections: spec.connections, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: 120_000, bodyTimeout: 120_000 });
  const url = `${spec.url}/chat/completions`;
  const body = JSON.stringify({ model: spec.model, stream, max_tokens: 64, messages: [{ role: 'user', content: PROMPTS[spec.prompt]() }] });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${spec.key}` };
  const latencies: number[] = [];
  const ttfts: number[] = [];
  let errors = 0;
  let firstError: string | null = null;
  let started = 0;
  const fail = (why: string) => {
    errors += 1;
    firstError ??= why;
  };

  const one = async () => {
    const t0 = process.hrtime.bigint();
    try {
      const res = await request(url, { method: 'POST', headers, body, dispatcher: agent });
      if (!stream) {
        const text = await res.body.text();
        if (res.statusCode !== 200) fail(`${res.statusCode} ${text.slice(0, 200)}`);
      } else {
        let seen = '';
        let first = false;
        let all = '';
        for await (const piece of res.body) {
          const text = (piece as Buffer).toString('utf8');
          if (!first) {
            seen += text;
            if (CONTENT.test(seen)) {
              first = true;
              ttfts.push(ms(t0));
            }
          }
          all = (all + text).slice(-100_000);
        }
        if (res.statusCode !== 200 || !all.includes('data: [DONE]') || all.includes('"error"')) fail(`${res.statusCode} …${all.slice(-400)}`);
      }
    } catch (error) {
      fail(String(error));
    }
    latencies.push(ms(t0));
  };

  const t0 = process.hrtime.bigint();
  if (spec.mode === 'hold') {
    const ramp = spec.rampMs ?? 0;
    await Promise.all(Array.from({ length: spec.connections }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, (i * ramp) / spec.connections));
      await one();
    }));
  } else {
    const deadline = Date.now() + spec.durationMs;
    const limit = spec.requests ?? Infinity;
    await Promise.all(Array.from({ length: spec.connections }, async () => {
      while (Date.now() < deadline && started < limit) {
        started += 1;
        await one();
      }
    }));
  }
  const seconds = ms(t0) / 1000;
  await agent.close();
  const sorted = latencies.sort((a, b) => a - b);
  const sortedTtft = ttfts.sort((a, b) => a - b);
  return {
    requests: latencies.length, errors, firstError, seconds, rps: latencies.length / seconds,
    p50: percentile(sorted, 50), p99: percentile(sorted, 99),
    ttftP50: stream ? percentile(sortedTtft, 50) : null, ttftP99: stream ? percentile(sortedTtft, 99) : null,
  };
}

if (process.argv[1]?.endsWith('load.ts') && process.argv[2]) {
  const result = await runLoad(JSON.parse(process.argv[2]) as LoadSpec);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
