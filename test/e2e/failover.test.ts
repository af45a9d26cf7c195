/**
 * Failover end to end: a first route that fails in each scripted way and an ok
 * second route; the client must see only the second route's answer. Then a
 * failure after the first content, which the client does see.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { countWords, startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { aliasesConfig, call, credits, parseSse, svcOf, usage } from '../support/e2e.js';

const REPLY = 'Hello from the fake upstream.';
const PRICE = { input_credits_per_1k: 100, output_credits_per_1k: 1000 };
const TIMEOUT_MS = 700;
const FAILURES = ['error-500', 'error-429', 'error-400', 'reset', 'malformed', 'hang', 'slow-5000'] as const;
const MODES = ['json', 'stream'] as const;
const ADMIN = 'admin-token-for-failover';

const messages = [{ role: 'user' as const, content: 'Hello there' }];
const cost = (prompt: number, completion: number) =>
  Math.ceil((prompt * PRICE.input_credits_per_1k + completion * PRICE.output_credits_per_1k) / 1000);

function aliases(): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  FAILURES.forEach((failure, i) => {
    for (const mode of MODES) out[`fo-${failure}-${mode}`] = [`primary-${failure}-${mode}`, `backup-${i}-${mode}`];
  });
  out['fo-slow-ok'] = ['primary-slow-100', 'backup-slow'];
  out['fo-ping'] = ['ping-hang', 'ping-slow-500'];
  out['fo-cut'] = ['only-cut'];
  out['fo-health'] = ['health-error-500', 'health-backup'];
  return out;
}

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

const contentOf = (chunks: ChatCompletionChunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');

describe('failover', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  let key: string;
  let client: OpenAI;

  before(async () => {
    upstream = await startFakeUpstream({ reply: REPLY });
    gw = await startGateway({
      config: aliasesConfig(upstream.url, aliases(), { first_byte_timeout_ms: TIMEOUT_MS, breaker: { failures: 3, cooldown_ms: 600_000 } }, PRICE),
      adminToken: ADMIN,
    });
    key = (await gw.createAccount({ purchased: 1_000_000 })).key;
    client = gw.client(key);
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  FAILURES.forEach((failure, i) => {
    it(`fails over from ${failure} to the second route (JSON)`, async () => {
      const balance = (await credits(gw, key)).total_credits;
      const completion = await client.chat.completions.create({ model: `fo-${failure}-json`, messages });
      assert.equal(completion.choices[0]!.message.content, REPLY);
      assert.equal(completion.choices[0]!.finish_reason, 'stop');
      assert.equal(completion.model, `fo-${failure}-json`);
      const svc = svcOf(completion);
      assert.equal(svc.routed_model, `backup-${i}-json`);
      assert.equal(svc.credits_used, cost(countWords(messages[0]!.content), countWords(REPLY)));
      assert.equal(svc.balance_remaining, balance - svc.credits_used);
      assert.deepEqual(upstream.requests.map((r) => r.model), [`primary-${failure}-json`, `backup-${i}-json`]);
    });

    it(`fails over from ${failure} to the second route (stream)`, async () => {
      const balance = (await credits(gw, key)).total_credits;
      const chunks = await collect(await client.chat.completions.create({ model: `fo-${failure}-stream`, messages, stream: true }));
      assert.equal(contentOf(chunks), REPLY);
      const last = chunks.at(-1)!;
      assert.equal(last.choices[0]!.finish_reason, 'stop');
      const svc = svcOf(last);
      assert.equal(svc.routed_model, `backup-${i}-stream`);
      assert.equal(svc.credits_used, cost(countWords(messages[0]!.content), countWords(REPLY)));
      assert.equal((await credits(gw, key)).total_credits, balance - svc.credits_used);
      assert.deepEqual(upstream.requests.map((r) => r.model), [`primary-${failure}-stream`, `backup-${i}-stream`]);
    });
  });

  it('shows nothing of a failover in the raw SSE: no error chunk, one [DONE]', async () => {
    const res = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'fo-hang-stream', messages, stream: true } });
    assert.equal(res.status, 200);
    const { data, comments } = parseSse(res.text);
    for (const comment of comments) assert.equal(comment, ': ping');
    assert.equal(data.at(-1), '[DONE]');
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as ChatCompletionChunk & { error?: unknown });
    for (const chunk of chunks) assert.equal(chunk.error, undefined);
    assert.equal(contentOf(chunks), REPLY);
    assert.equal(svcOf(chunks.at(-1)!).routed_model, 'backup-5-stream');
  });

  it('keeps a stream open with ": ping" comments while it waits on upstreams', async () => {
    const res = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'fo-ping', messages, stream: true } });
    assert.equal(res.status, 200);
    const { data, comments } = parseSse(res.text);
    assert.ok(comments.length >= 1, 'no ping while waiting 700 ms + 500 ms');
    for (const comment of comments) assert.equal(comment, ': ping');
    assert.ok(res.text.startsWith(': ping\n\n'), res.text.slice(0, 40));
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as ChatCompletionChunk);
    assert.equal(contentOf(chunks), REPLY);
    assert.equal(svcOf(chunks.at(-1)!).routed_model, 'ping-slow-500');
  });

  it('serves a slow first byte within the timeout from the first route', async () => {
    const completion = await client.chat.completions.create({ model: 'fo-slow-ok', messages });
    assert.equal(svcOf(completion).routed_model, 'primary-slow-100');
    const chunks = await collect(await client.chat.completions.create({ model: 'fo-slow-ok', messages, stream: true }));
    assert.equal(contentOf(chunks), REPLY);
    assert.equal(svcOf(chunks.at(-1)!).routed_model, 'primary-slow-100');
    assert.deepEqual(upstream.requests.map((r) => r.model), ['primary-slow-100', 'primary-slow-100']);
  });

  describe('a failure after the first content', () => {
    it('reaches the SDK as an error after the delivered content, and charges the prompt and the delivered tokens', async () => {
      const { key: cutKey } = await gw.createAccount({ purchased: 10_000 });
      const stream = await gw.client(cutKey).chat.completions.create({ model: 'fo-cut', messages, stream: true });
      const received: string[] = [];
      let caught: unknown;
      try {
        for await (const chunk of stream) received.push(chunk.choices[0]?.delta.content ?? '');
      } catch (err) {
        caught = err;
      }
      assert.equal(received.join(''), 'Hello from');
      assert.ok(caught instanceof OpenAI.APIError, `expected an APIError, got ${String(caught)}`);
      assert.equal(caught.code, 'upstream_unavailable');
      assert.equal(caught.type, 'upstream_error');

      const prompt = countPromptTokens(messages);
      const delivered = countTextTokens('Hello from');
      const expected = cost(prompt, delivered);
      const after = await credits(gw, cutKey);
      assert.deepEqual([after.total_credits, after.reserved_credits], [10_000 - expected, 0]);
      const used = await usage(gw, cutKey);
      assert.deepEqual(
        [used.total_requests, used.total_prompt_tokens, used.total_completion_tokens, used.total_credits_spent],
        [1, prompt, delivered, expected],
      );
    });

    it('writes an error chunk then [DONE] on the wire', async () => {
      const { key: cutKey } = await gw.createAccount({ purchased: 10_000 });
      const res = await call(gw, 'POST', '/v1/chat/completions', { key: cutKey, body: { model: 'fo-cut', messages, stream: true } });
      assert.equal(res.status, 200);
      const { data } = parseSse(res.text);
      assert.equal(data.at(-1), '[DONE]');
      const errorChunk = JSON.parse(data.at(-2)!) as { error: { type: string; code: string; message: string } };
      assert.deepEqual([errorChunk.error.type, errorChunk.error.code], ['upstream_error', 'upstream_unavailable']);
      const content = data.slice(0, -2).map((d) => (JSON.parse(d) as ChatCompletionChunk).choices[0]?.delta.content ?? '').join('');
      assert.equal(content, 'Hello from');
      assert.equal((await credits(gw, cutKey)).total_credits, 10_000 - cost(countPromptTokens(messages), countTextTokens('Hello from')));
    });

    it('answers a cut JSON response with 502 and charges nothing', async () => {
      const { key: cutKey } = await gw.createAccount({ purchased: 10_000 });
      const res = await call(gw, 'POST', '/v1/chat/completions', { key: cutKey, body: { model: 'fo-cut', messages } });
      assert.equal(res.status, 502);
      assert.equal((await credits(gw, cutKey)).total_credits, 10_000);
      assert.equal((await usage(gw, cutKey)).total_requests, 0);
    });
  });

  describe('GET /admin/v1/upstreams', () => {
    interface Health { upstream: string; state: string; consecutive_failures: number; failures: number; successes: number; last_error: string | null; open_until: string | null }
    const health = async (): Promise<Map<string, Health>> => {
      const res = await call(gw, 'GET', '/admin/v1/upstreams', { key: ADMIN });
      assert.equal(res.status, 200, res.text);
      const body = res.json as { object: string; data: Health[] };
      assert.equal(body.object, 'list');
      return new Map(body.data.map((h) => [h.upstream, h]));
    };

    it('counts the failing upstream\'s failures, opens its breaker, and routes around it', async () => {
      for (let n = 0; n < 2; n++) await client.chat.completions.create({ model: 'fo-health', messages });
      let view = await health();
      assert.deepEqual(
        { ...view.get('fake/health-error-500')!, last_error: null, latency_p50_ms: null, latency_p95_ms: null },
        {
          upstream: 'fake/health-error-500', state: 'closed', consecutive_failures: 2, failures: 2, successes: 0, last_error: null, open_until: null,
          recent_attempts: 2, recent_failures: 2, recent_error_rate: 1, latency_p50_ms: null, latency_p95_ms: null,
        },
      );
      assert.match(view.get('fake/health-error-500')!.last_error ?? '', /^status: .*500/);
      assert.deepEqual([view.get('fake/health-backup')!.successes, view.get('fake/health-backup')!.failures], [2, 0]);
      assert.equal(view.get('fake/primary-reset-json')!.failures, 1);
      assert.equal(view.get('fake/backup-3-json')!.successes, 1);

      await client.chat.completions.create({ model: 'fo-health', messages });
      view = await health();
      assert.equal(view.get('fake/health-error-500')!.state, 'open');
      assert.equal(view.get('fake/health-error-500')!.consecutive_failures, 3);
      assert.ok(view.get('fake/health-error-500')!.open_until);

      upstream.reset();
      const completion = await client.chat.completions.create({ model: 'fo-health', messages });
      assert.equal(svcOf(completion).routed_model, 'health-backup');
      assert.deepEqual(upstream.requests.map((r) => r.model), ['health-backup']);
    });
  });
});
