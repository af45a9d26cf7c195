/**
 * The bounds an upstream cannot break, end to end against the real HTTP fake
 * upstream: silence after the first word (`routing.stream_idle_timeout_ms`), a
 * request that never ends (`routing.max_request_ms`), `[DONE]` on a body that
 * stays open, output past `max_tokens`, a line or a JSON body too large to hold,
 * and upstream details that must reach the log and never the caller. Each case
 * says why it fails on the code before these bounds; the ones that would hang
 * there are caught by each case's timeout (BOUND), never by a timing assertion.
 */
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it, type TestContext } from 'node:test';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { outputBound } from '../../src/gateway/read-answer.js';
import { creditsFor } from '../../src/metering/pricing.js';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { countWords, IGNORED_MAX_REPLY, startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { aliasesConfig, assertError, credits, parseSse, svcOf, usage, type ErrorBody, type HttpResult, type Svc } from '../support/e2e.js';
import { ledgerVerifyCli, waitFor } from '../support/e2e-helpers.js';

const REPLY = 'one two three four five six';
const PRICE = { input_credits_per_1k: 100, output_credits_per_1k: 1000 };
const MODES = ['json', 'stream'] as const;
/**
 * Each case's bound: several times every limit configured below, far below what an
 * unbounded wait takes (undici's 300 s body timeout, or never).
 */
const BOUND = { timeout: 10_000 };

const messages = [{ role: 'user' as const, content: 'Hello there' }];
const PROMPT_TOKENS = countPromptTokens(messages);
const cost = (prompt: number, completion: number) => creditsFor(prompt, completion, PRICE);

/** A chunk as it is on the wire: content chunks, the finish chunk, or the error chunk that ends a broken stream. */
interface WireChunk {
  choices?: Array<{ delta: { content?: string | null }; finish_reason: string | null }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  svc?: Svc;
  error?: ErrorBody['error'];
}

interface WireCompletion {
  choices: Array<{ message: { content: string }; finish_reason: string }>;
  usage: { prompt_tokens: number; completion_tokens: number };
  svc: Svc;
}

/**
 * One completion as raw HTTP, abandoned when the case times out (`t.signal`): a
 * gateway without these bounds then sees its client leave and lets the upstream go.
 */
async function complete(
  t: TestContext, gw: TestGateway, key: string, model: string, stream: boolean, extra: Record<string, unknown> = {},
): Promise<HttpResult> {
  const response = await fetch(`${gw.origin}/v1/chat/completions`, {
    method: 'POST', signal: t.signal,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, messages, ...(stream && { stream: true }), ...extra }),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, headers: response.headers, text, json };
}

/** A 200 stream's chunks, its content and its last chunk; it must end with exactly one `[DONE]`. */
function readStream(res: HttpResult): { chunks: WireChunk[]; content: string; last: WireChunk } {
  assert.equal(res.status, 200, res.text.slice(0, 300));
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const { data } = parseSse(res.text);
  assert.equal(data.at(-1), '[DONE]', `no [DONE] at the end: ${res.text.slice(-300)}`);
  assert.equal(data.filter((d) => d === '[DONE]').length, 1);
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as WireChunk);
  const content = chunks.map((c) => c.choices?.[0]?.delta.content ?? '').join('');
  return { chunks, content, last: chunks.at(-1)! };
}

function requestIdOf(res: HttpResult): string {
  const id = res.headers.get('x-request-id');
  assert.ok(id, 'every response carries x-request-id');
  return id;
}

/** A fresh account, and what its credits read before the case. */
async function account(gw: TestGateway): Promise<{ key: string; before: number }> {
  const { key } = await gw.createAccount({ purchased: 100_000 });
  return { key, before: (await credits(gw, key)).total_credits };
}

/** The account paid `expected` in all and holds nothing any more. */
async function assertCharged(gw: TestGateway, key: string, before: number, expected: number): Promise<void> {
  const after = await credits(gw, key);
  assert.deepEqual({ charged: before - after.total_credits, reserved: after.reserved_credits }, { charged: expected, reserved: 0 });
}

interface Env { gw: TestGateway; upstream: FakeUpstream }

/**
 * A fake upstream and a gateway routed to it for the current suite. The upstream
 * closes first: that ends whatever requests a gateway without these bounds left
 * hanging (a case that timed out), so that the gateway can close.
 */
function useGateway(configure: (upstreamUrl: string) => unknown): Env {
  const env = {} as Env;
  before(async () => {
    env.upstream = await startFakeUpstream({ reply: REPLY });
    env.gw = await startGateway({ config: configure(env.upstream.url) });
  });
  after(async () => {
    await env.upstream.close();
    await env.gw.close();
  });
  return env;
}

function ledgerVerifies(env: Env): void {
  it('leaves a ledger that `ledger verify` accepts', BOUND, async () => {
    const result = await ledgerVerifyCli(env.gw.databaseUrl);
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
  });
}

describe('routing.stream_idle_timeout_ms: an upstream silent after its first word', () => {
  // Without the bound the config dropped stream_idle_timeout_ms and the upstream's keep-alive
  // comments kept undici's body timeout from firing: these requests never ended.
  const env = useGateway((url) => aliasesConfig(url, {
    idle: ['upstream-idle-after-first'], 'done-open': ['upstream-done-open'],
  }, { stream_idle_timeout_ms: 400 }, PRICE));

  it('ends the stream with an upstream_timeout chunk after the first word, and charges the prompt and that word', BOUND, async (t) => {
    const { gw, upstream } = env;
    const { key, before } = await account(gw);
    const res = await complete(t, gw, key, 'idle', true);
    const { chunks, content, last } = readStream(res);
    assert.equal(content, 'one');
    assert.ok(last.error, `the stream ends with an error chunk: ${JSON.stringify(last)}`);
    assert.deepEqual([last.error.type, last.error.code], ['upstream_error', 'upstream_timeout']);
    assert.ok(last.error.message.endsWith(`(request id: ${requestIdOf(res)})`), last.error.message);
    assert.equal(chunks.filter((c) => c.error).length, 1);
    const delivered = countTextTokens('one');
    assert.deepEqual(last.usage, { prompt_tokens: PROMPT_TOKENS, completion_tokens: delivered, total_tokens: PROMPT_TOKENS + delivered });
    assert.equal(svcOf(last).credits_used, cost(PROMPT_TOKENS, delivered));
    await assertCharged(gw, key, before, svcOf(last).credits_used);
    assert.equal(upstream.requests.at(-1)!.model, 'upstream-idle-after-first');
  });

  it('answers the same request in JSON with 504 upstream_timeout, and charges nothing', BOUND, async (t) => {
    const { gw } = env;
    const { key, before } = await account(gw);
    const res = await complete(t, gw, key, 'idle', false);
    const error = assertError(res, 504, 'upstream_error', 'upstream_timeout');
    assert.ok(error.message.endsWith(`(request id: ${requestIdOf(res)})`), error.message);
    await assertCharged(gw, key, before, 0);
    assert.equal((await usage(gw, key)).total_requests, 0);
  });

  // An upstream that sends `[DONE]` and keeps its body open: before, the gateway read on past
  // `[DONE]` to the body's end, which never came (BOUND caught it). With the idle
  // bound alone it would end as upstream_timeout here, not as a clean finish.
  for (const mode of MODES) {
    it(`finishes at [DONE] when the upstream never closes the body (${mode}), charged as usual`, BOUND, async (t) => {
      const { gw } = env;
      const { key, before } = await account(gw);
      const res = await complete(t, gw, key, 'done-open', mode === 'stream');
      const expected = cost(countWords(messages[0]!.content), countWords(REPLY));
      if (mode === 'json') {
        assert.equal(res.status, 200, res.text.slice(0, 300));
        const completion = res.json as WireCompletion;
        assert.equal(completion.choices[0]!.message.content, REPLY);
        assert.equal(completion.choices[0]!.finish_reason, 'stop');
        assert.equal(completion.svc.credits_used, expected);
      } else {
        const { chunks, content, last } = readStream(res);
        assert.equal(content, REPLY);
        assert.equal(chunks.filter((c) => c.error).length, 0);
        assert.equal(last.choices?.[0]?.finish_reason, 'stop');
        assert.equal(svcOf(last).credits_used, expected);
      }
      await assertCharged(gw, key, before, expected);
    });
  }

  ledgerVerifies(env);
});

describe('routing.max_request_ms: an upstream that drips words forever', () => {
  // Before, there was no whole-request bound: a word every 100 ms satisfies every other
  // timeout, so these requests never ended (BOUND caught them).
  const env = useGateway((url) => aliasesConfig(url, { drip: ['upstream-drip'] }, { max_request_ms: 1500 }, PRICE));

  it('ends the stream with an upstream_timeout chunk after the words delivered, and charges those', BOUND, async (t) => {
    const { gw } = env;
    const { key, before } = await account(gw);
    const { content, last } = readStream(await complete(t, gw, key, 'drip', true));
    assert.ok(content.startsWith('one'), content);
    assert.ok(last.error, `the stream ends with an error chunk: ${JSON.stringify(last)}`);
    assert.deepEqual([last.error.type, last.error.code], ['upstream_error', 'upstream_timeout']);
    const expected = cost(PROMPT_TOKENS, countTextTokens(content));
    assert.equal(svcOf(last).credits_used, expected);
    await assertCharged(gw, key, before, expected);
  });

  it('answers the same request in JSON with 504 upstream_timeout, and charges nothing', BOUND, async (t) => {
    const { gw } = env;
    const { key, before } = await account(gw);
    assertError(await complete(t, gw, key, 'drip', false), 504, 'upstream_error', 'upstream_timeout');
    await assertCharged(gw, key, before, 0);
  });

  ledgerVerifies(env);
});

describe('upstreams past the output, size and disclosure bounds', () => {
  const env = useGateway((url) => aliasesConfig(url, {
    'ignore-max': ['upstream-ignore-max'],
    // Answers JSON, the whole text in one piece, when asked to stream.
    'ignore-max-whole': ['upstream-ignore-max-nostream'],
    'huge-line': ['first-huge-line', 'second-ok'],
    'huge-json': ['first-huge-json', 'second-ok'],
    'leak-500': ['upstream-leaky-500'],
    'leak-cut': ['upstream-leaky-cut'],
  }, {}, PRICE));
  beforeEach(() => env.upstream.reset());

  describe('an upstream that ignores max_tokens', () => {
    // Before, every one of the 3,000 words reached the caller (thousands of tokens, far past
    // outputBound(20)) with finish_reason "stop"; only the bill was capped.
    const MAX = 20;
    const reserved = cost(PROMPT_TOKENS, MAX);

    const assertCut = (content: string, finishReason: string | null | undefined, completionTokens: number | undefined, svc: Svc) => {
      assert.equal(finishReason, 'length');
      assert.ok(content.length > 0 && IGNORED_MAX_REPLY.startsWith(content), `a prefix of the upstream's answer: ${content.slice(0, 80)}`);
      assert.ok(countTextTokens(content) <= outputBound(MAX), `${countTextTokens(content)} tokens delivered, bound ${outputBound(MAX)}`);
      assert.ok(completionTokens !== undefined && completionTokens <= MAX, `billed ${completionTokens} output tokens`);
      assert.ok(svc.credits_used <= reserved, `charged ${svc.credits_used}, reserved ${reserved}`);
    };

    for (const model of ['ignore-max', 'ignore-max-whole']) {
      for (const mode of MODES) {
        it(`cuts ${model} at the bound with finish_reason "length" and bills at most max_tokens (${mode})`, BOUND, async (t) => {
          const { gw, upstream } = env;
          const { key, before } = await account(gw);
          const res = await complete(t, gw, key, model, mode === 'stream', { max_tokens: MAX });
          let svc: Svc;
          if (mode === 'json') {
            assert.equal(res.status, 200, res.text.slice(0, 300));
            const completion = res.json as WireCompletion;
            svc = completion.svc;
            assertCut(completion.choices[0]!.message.content, completion.choices[0]!.finish_reason, completion.usage.completion_tokens, svc);
          } else {
            const { chunks, content, last } = readStream(res);
            assert.equal(chunks.filter((c) => c.error).length, 0);
            svc = svcOf(last);
            assertCut(content, last.choices?.[0]?.finish_reason, last.usage?.completion_tokens, svc);
          }
          await assertCharged(gw, key, before, svc.credits_used);
          assert.equal(upstream.requests[0]!.body.max_tokens, MAX, 'the upstream was asked for max_tokens, and ignored it');
        });
      }
    }

    it('cuts it the same for the official openai client, which reads the stream to its end', BOUND, async (t) => {
      const { gw } = env;
      const { key, before } = await account(gw);
      const stream = await gw.client(key).chat.completions.create({ model: 'ignore-max', messages, max_tokens: MAX, stream: true }, { signal: t.signal });
      const chunks: ChatCompletionChunk[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      const last = chunks.at(-1)!;
      const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
      assertCut(content, last.choices[0]?.finish_reason, last.usage?.completion_tokens, svcOf(last));
      await assertCharged(gw, key, before, svcOf(last).credits_used);
    });
  });

  describe('a first route whose answer is too large to hold', () => {
    // Before, a 2 MiB line and a 9 MiB JSON body were read whole and served: the first route
    // answered (routed_model "first-…") with megabytes of content.
    for (const model of ['huge-line', 'huge-json']) {
      for (const mode of MODES) {
        it(`fails ${model} over to the second route as malformed, charged once (${mode})`, BOUND, async (t) => {
          const { gw, upstream } = env;
          const { key, before } = await account(gw);
          const res = await complete(t, gw, key, model, mode === 'stream');
          let content: string;
          let svc: Svc;
          if (mode === 'json') {
            assert.equal(res.status, 200, res.text.slice(0, 300));
            const completion = res.json as WireCompletion;
            content = completion.choices[0]!.message.content;
            svc = completion.svc;
          } else {
            const read = readStream(res);
            assert.equal(read.chunks.filter((c) => c.error).length, 0);
            content = read.content;
            svc = svcOf(read.last);
          }
          assert.equal(svc.routed_model, 'second-ok');
          assert.deepEqual(upstream.requests.map((r) => r.model), [`first-${model}`, 'second-ok']);
          assert.ok(content === REPLY, `the second route's answer, not ${content.length} characters: ${content.slice(0, 80)}`);
          const expected = cost(countWords(messages[0]!.content), countWords(REPLY));
          assert.equal(svc.credits_used, expected);
          await assertCharged(gw, key, before, expected);
          assert.equal((await usage(gw, key)).total_requests, 1);
        });
      }
    }
  });

  describe("an upstream's own words", () => {
    // Before, the caller read `Every upstream failed (fake/upstream-leaky-500: answered HTTP 500).`
    // and `The upstream failed mid-stream: fake sent an error chunk: {…db-7.internal exploded…}.`:
    // the provider, the upstream model and the upstream's text, and no request id.
    const LEAKS = ['internal detail', 'upstream detail', 'db-7', 'sk-upstream', 'SECRET', 'exploded', 'fake', 'leaky'];

    const assertNoLeak = (text: string, requestId: string) => {
      const scrubbed = text.replaceAll(requestId, '<request id>');
      for (const leak of LEAKS) assert.ok(!scrubbed.includes(leak), `'${leak}' reached the caller: ${scrubbed.slice(0, 400)}`);
    };

    /** The log lines of one request (pino JSON with `reqId`), once one of them holds `detail`. */
    const logged = (gw: TestGateway, requestId: string, detail: string) => waitFor(
      async () => gw.logs.filter((line) => line.startsWith('{') && (JSON.parse(line) as { reqId?: unknown }).reqId === requestId),
      (lines) => lines.some((line) => line.includes(detail)),
      `a log line of ${requestId} with '${detail}'`,
    );

    for (const mode of MODES) {
      it(`answers an upstream 500 with the gateway's own words and its request id (${mode}); the details go to the log`, BOUND, async (t) => {
        const { gw } = env;
        const { key, before } = await account(gw);
        // Nothing was delivered, so a stream fails as plain HTTP too.
        const res = await complete(t, gw, key, 'leak-500', mode === 'stream');
        const requestId = requestIdOf(res);
        const error = assertError(res, 502, 'upstream_error', 'upstream_unavailable');
        assert.equal(error.message, `Every upstream failed. (request id: ${requestId})`);
        assertNoLeak(res.text, requestId);
        const lines = await logged(gw, requestId, 'internal detail');
        assert.ok(lines.some((line) => line.includes('internal detail') && line.includes('500')), lines.join('\n'));
        await assertCharged(gw, key, before, 0);
      });
    }

    it("ends a stream cut by an upstream error chunk with the gateway's own words; the details go to the log", BOUND, async (t) => {
      const { gw } = env;
      const { key, before } = await account(gw);
      const res = await complete(t, gw, key, 'leak-cut', true);
      const requestId = requestIdOf(res);
      const { content, last } = readStream(res);
      assert.equal(content, 'one two');
      assert.ok(last.error, `the stream ends with an error chunk: ${JSON.stringify(last)}`);
      assert.deepEqual([last.error.type, last.error.code], ['upstream_error', 'upstream_unavailable']);
      assert.equal(last.error.message, `The upstream failed in the middle of the answer. (request id: ${requestId})`);
      assertNoLeak(JSON.stringify(last.error), requestId);
      // `svc` names the routed model and provider by design; nothing of the upstream's text is anywhere.
      assertNoLeak(res.text.replaceAll('upstream-leaky-cut', '').replaceAll('"provider":"fake"', ''), requestId);
      await logged(gw, requestId, 'db-7.internal exploded');
      const delivered = countTextTokens('one two');
      await assertCharged(gw, key, before, cost(PROMPT_TOKENS, delivered));
    });

    it("answers the same cut in JSON with 502 in the gateway's own words, and charges nothing", BOUND, async (t) => {
      const { gw } = env;
      const { key, before } = await account(gw);
      const res = await complete(t, gw, key, 'leak-cut', false);
      const requestId = requestIdOf(res);
      const error = assertError(res, 502, 'upstream_error', 'upstream_unavailable');
      assert.equal(error.message, `The upstream failed in the middle of the answer. (request id: ${requestId})`);
      assertNoLeak(res.text, requestId);
      await logged(gw, requestId, 'db-7.internal exploded');
      await assertCharged(gw, key, before, 0);
    });
  });

  ledgerVerifies(env);
});
