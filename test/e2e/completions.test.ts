/**
 * Chat completions end to end: the official openai SDK against a real gateway
 * whose routes lead to the scripted fake upstream.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { ChatCompletionChunk, ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { countPromptTokens } from '../../src/metering/tokens.js';
import { countWords, startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { fakeUpstreamConfig, startGateway, type TestGateway } from '../support/gateway.js';
import { assertError, call, credits, parseSse, svcOf, usage } from '../support/e2e.js';

const REPLY = 'The gateway answered this request with exactly twelve words of plain text.';
const REPLY_WORDS = 12;
const SMART = { in: 25, out: 75 };
const FAST = { in: 4, out: 12 };

const cost = (prompt: number, completion: number, price: { in: number; out: number }) =>
  Math.ceil((prompt * price.in + completion * price.out) / 1000);

const bigPrompt: ChatCompletionMessageParam[] = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: Array.from({ length: 300 }, (_, i) => `word${i}`).join(' ') },
];
const BIG_PROMPT_WORDS = 303;

describe('chat completions', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    upstream = await startFakeUpstream({ reply: REPLY });
    gw = await startGateway({ config: fakeUpstreamConfig(upstream.url, { 'svc-code': ['code-slow-400'] }) });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  it('answers a JSON completion in the OpenAI shape with usage and svc', async () => {
    assert.equal(countWords(REPLY), REPLY_WORDS);
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const before = Math.floor(Date.now() / 1000);
    const completion = await gw.client(key).chat.completions.create({ model: 'svc-smart', messages: bigPrompt });
    const afterSec = Math.floor(Date.now() / 1000);

    assert.match(completion.id, /^chatcmpl-[0-9A-Za-z]+$/);
    assert.equal(completion.object, 'chat.completion');
    assert.ok(Number.isInteger(completion.created) && completion.created >= before - 1 && completion.created <= afterSec + 1);
    assert.equal(completion.model, 'svc-smart');
    assert.deepEqual(completion.choices, [
      { index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' },
    ]);
    assert.deepEqual(completion.usage, {
      prompt_tokens: BIG_PROMPT_WORDS, completion_tokens: REPLY_WORDS, total_tokens: BIG_PROMPT_WORDS + REPLY_WORDS,
    });
    const svc = svcOf(completion);
    const expected = cost(BIG_PROMPT_WORDS, REPLY_WORDS, SMART);
    assert.equal(expected, 9);
    assert.equal(svc.requested_model, 'svc-smart');
    assert.equal(svc.routed_model, 'svc-smart-ok');
    assert.equal(svc.credits_used, expected);
    assert.equal(svc.balance_remaining, 100_000 - expected);
    assert.ok(Number.isInteger(svc.latency_ms) && svc.latency_ms >= 0, `latency_ms ${svc.latency_ms}`);

    const after = await credits(gw, key);
    assert.equal(after.total_credits, svc.balance_remaining);
    assert.equal(after.reserved_credits, 0);
    assert.deepEqual(upstream.requests.map((r) => r.model), ['svc-smart-ok']);
  });

  it('streams with the SDK: content, finish chunk with usage and svc, one id', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const stream = await gw.client(key).chat.completions.create({ model: 'svc-smart', messages: bigPrompt, stream: true });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);

    assert.ok(chunks.length >= 3, `only ${chunks.length} chunks`);
    const id = chunks[0]!.id;
    assert.match(id, /^chatcmpl-/);
    for (const c of chunks) {
      assert.equal(c.id, id);
      assert.equal(c.object, 'chat.completion.chunk');
      assert.equal(c.model, 'svc-smart');
      assert.ok(Number.isInteger(c.created));
    }
    assert.equal(chunks[0]!.choices[0]!.delta.role, 'assistant');
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), REPLY);

    const last = chunks.at(-1)!;
    assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason != null).length, 1);
    assert.equal(last.choices[0]!.finish_reason, 'stop');
    assert.deepEqual(last.usage, { prompt_tokens: BIG_PROMPT_WORDS, completion_tokens: REPLY_WORDS, total_tokens: BIG_PROMPT_WORDS + REPLY_WORDS });
    const svc = svcOf(last);
    assert.equal(svc.requested_model, 'svc-smart');
    assert.equal(svc.routed_model, 'svc-smart-ok');
    assert.equal(svc.credits_used, cost(BIG_PROMPT_WORDS, REPLY_WORDS, SMART));
    assert.equal(svc.balance_remaining, 100_000 - svc.credits_used);
    for (const c of chunks.slice(0, -1)) assert.equal((c as { svc?: unknown }).svc, undefined);
    assert.equal((await credits(gw, key)).total_credits, svc.balance_remaining);
  });

  it('with stream_options.include_usage ends with a choices-less chunk carrying usage and svc', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const stream = await gw.client(key).chat.completions.create({
      model: 'svc-fast', messages: [{ role: 'user', content: 'Say something nice' }], stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const final = chunks.at(-1)!;
    const finish = chunks.at(-2)!;
    assert.deepEqual(final.choices, []);
    assert.equal(finish.choices[0]!.finish_reason, 'stop');
    const expectedUsage = { prompt_tokens: 3, completion_tokens: REPLY_WORDS, total_tokens: 3 + REPLY_WORDS };
    assert.deepEqual(final.usage, expectedUsage);
    assert.deepEqual(finish.usage, expectedUsage);
    assert.deepEqual(svcOf(final), svcOf(finish));
    assert.equal(svcOf(final).credits_used, cost(3, REPLY_WORDS, FAST));
  });

  it('writes the raw SSE as data lines ended by [DONE]', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key, body: { model: 'svc-fast', messages: [{ role: 'user', content: 'Hello' }], stream: true, stream_options: { include_usage: true } },
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.ok(res.text.endsWith('\n\ndata: [DONE]\n\n'), res.text.slice(-80));
    for (const line of res.text.split('\n')) assert.ok(line === '' || line.startsWith('data: ') || line.startsWith(':'), line);
    const { data } = parseSse(res.text);
    assert.equal(data.at(-1), '[DONE]');
    assert.equal(data.filter((d) => d === '[DONE]').length, 1);
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as ChatCompletionChunk & { svc?: unknown });
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), REPLY);
    const final = chunks.at(-1)!;
    assert.deepEqual(final.choices, []);
    assert.deepEqual(final.usage, { prompt_tokens: 1, completion_tokens: REPLY_WORDS, total_tokens: 1 + REPLY_WORDS });
    assert.equal(svcOf(final).routed_model, 'svc-fast-ok');
  });

  it('bills svc-auto at its own price whichever alias serves', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const completion = await gw.client(key).chat.completions.create({ model: 'svc-auto', messages: bigPrompt });
    const svc = svcOf(completion);
    assert.equal(completion.model, 'svc-auto');
    assert.equal(svc.requested_model, 'svc-auto');
    assert.ok(['svc-fast-ok', 'svc-smart-ok', 'code-slow-400'].includes(svc.routed_model), svc.routed_model);
    assert.deepEqual(upstream.requests.map((r) => r.model), [svc.routed_model]);
    assert.equal(svc.credits_used, cost(BIG_PROMPT_WORDS, REPLY_WORDS, { in: 10, out: 30 }));
  });

  it('forwards max_tokens = 4096 and the sampling defaults when the caller sets none', async () => {
    const { key } = await gw.createAccount({ purchased: 1_000_000 });
    await gw.client(key).chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi there' }] });
    const body = upstream.requests[0]!.body;
    assert.equal(body.max_tokens, 4096);
    assert.equal(body.temperature, 0.7);
    assert.equal(body.top_p, 1);
  });

  it('clamps the forwarded max_tokens to what the credits afford', async () => {
    const { key } = await gw.createAccount({ purchased: 20 });
    const messages = [{ role: 'user' as const, content: 'Hi there' }];
    await gw.client(key).chat.completions.create({ model: 'svc-fast', messages });
    const prompt = countPromptTokens(messages);
    assert.equal(upstream.requests[0]!.body.max_tokens, Math.floor((20_000 - prompt * FAST.in) / FAST.out));
  });

  it("clamps the forwarded max_tokens to what the key's daily cap leaves", async () => {
    const { key } = await gw.createAccount({ purchased: 100_000, key: { dailyCreditLimit: 10 } });
    const messages = [{ role: 'user' as const, content: 'Hi there' }];
    await gw.client(key).chat.completions.create({ model: 'svc-fast', messages });
    const prompt = countPromptTokens(messages);
    assert.equal(upstream.requests[0]!.body.max_tokens, Math.floor((10_000 - prompt * FAST.in) / FAST.out));
  });

  it('forwards the caller\'s temperature and top_p as given', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    await gw.client(key).chat.completions.create({
      model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }], temperature: 0.2, top_p: 0.5, max_tokens: 50,
    });
    const body = upstream.requests[0]!.body;
    assert.deepEqual([body.temperature, body.top_p, body.max_tokens], [0.2, 0.5, 50]);
  });

  it('treats max_completion_tokens as max_tokens', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const completion = await gw.client(key).chat.completions.create({
      model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }], max_completion_tokens: 7,
    });
    assert.equal(upstream.requests[0]!.body.max_tokens, 7);
    assert.equal(upstream.requests[0]!.body.max_completion_tokens, undefined);
    assert.equal(completion.choices[0]!.message.content, REPLY.split(' ').slice(0, 7).join(' '));
    assert.equal(completion.choices[0]!.finish_reason, 'length');
    assert.equal(completion.usage!.completion_tokens, 7);
  });

  it('accepts content as an array of text parts and the developer role', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const completion = await gw.client(key).chat.completions.create({
      model: 'svc-fast',
      messages: [
        { role: 'developer', content: 'Answer briefly please' },
        { role: 'user', content: [{ type: 'text', text: 'Say hello ' }, { type: 'text', text: 'to me' }] },
      ],
    });
    const sent = upstream.requests[0]!.body.messages as Array<{ role: string; content: unknown }>;
    assert.equal(sent.length, 2);
    assert.deepEqual(sent[0], { role: 'system', content: 'Answer briefly please' });
    assert.equal(sent[1]!.role, 'user');
    assert.equal(typeof sent[1]!.content, 'string');
    assert.equal(countWords(sent[1]!.content as string), 4);
    assert.equal(completion.usage!.prompt_tokens, 3 + 4);
    assert.equal(completion.choices[0]!.message.content, REPLY);
  });

  it('forwards the known optional fields and never the unknown ones', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key,
      body: {
        model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }],
        foo: 'bar', logit_bias: { 50256: -100 }, metadata: { a: 1 }, store: true, service_tier: 'auto',
      },
    });
    assert.equal(res.status, 200, res.text);
    // JSON completions are streamed from the upstream and gathered, so the first-byte timeout means the same in both modes.
    assert.deepEqual(Object.keys(upstream.requests[0]!.body).sort(), ['max_tokens', 'messages', 'model', 'stream', 'stream_options', 'temperature', 'top_p']);
    assert.equal(upstream.requests[0]!.body.stream, true);

    upstream.reset();
    const known = await call(gw, 'POST', '/v1/chat/completions', {
      key,
      body: {
        model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }], stop: ['END'], seed: 42, presence_penalty: 0.5,
        frequency_penalty: -0.5, user: 'user-7', response_format: { type: 'json_object' }, n: 1,
      },
    });
    assert.equal(known.status, 200, known.text);
    const body = upstream.requests[0]!.body;
    assert.deepEqual(
      { stop: body.stop, seed: body.seed, presence_penalty: body.presence_penalty, frequency_penalty: body.frequency_penalty, user: body.user, response_format: body.response_format },
      { stop: ['END'], seed: 42, presence_penalty: 0.5, frequency_penalty: -0.5, user: 'user-7', response_format: { type: 'json_object' } },
    );
  });

  it('echoes a sane x-request-id and makes one up otherwise', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const body = { model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] };
    const sane = await call(gw, 'POST', '/v1/chat/completions', { key, body, headers: { 'x-request-id': 'trace-abc.123:7' } });
    assert.equal(sane.status, 200);
    assert.equal(sane.headers.get('x-request-id'), 'trace-abc.123:7');

    const streamed = await call(gw, 'POST', '/v1/chat/completions', { key, body: { ...body, stream: true }, headers: { 'x-request-id': 'stream-id-1' } });
    assert.equal(streamed.headers.get('x-request-id'), 'stream-id-1');

    const insane = await call(gw, 'POST', '/v1/chat/completions', { key, body, headers: { 'x-request-id': 'bad id <script>' } });
    const tooLong = await call(gw, 'GET', '/v1/models', { key, headers: { 'x-request-id': 'x'.repeat(300) } });
    const none = await call(gw, 'GET', '/v1/models', { key });
    const unauthenticated = await call(gw, 'GET', '/v1/models', { headers: { 'x-request-id': 'err-trace-1' } });
    assert.equal(unauthenticated.status, 401);
    assert.equal(unauthenticated.headers.get('x-request-id'), 'err-trace-1');
    const generated = [insane, tooLong, none].map((r) => r.headers.get('x-request-id') ?? '');
    for (const id of generated) assert.match(id, /^req_[0-9A-Za-z]+$/);
    assert.equal(new Set(generated).size, 3);
  });

  it('replays an Idempotency-Key with the same body and charges once', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const client = gw.client(key);
    const body = { model: 'svc-smart', messages: bigPrompt };
    const options = { headers: { 'Idempotency-Key': 'order-4711' } };
    const first = await client.chat.completions.create(body, options);
    const balanceAfterFirst = (await credits(gw, key)).total_credits;
    assert.equal(balanceAfterFirst, 100_000 - cost(BIG_PROMPT_WORDS, REPLY_WORDS, SMART));
    const second = await client.chat.completions.create(body, options);

    assert.equal(second.id, first.id);
    assert.deepEqual(second.choices, first.choices);
    assert.deepEqual(svcOf(second), svcOf(first));
    assert.equal((await credits(gw, key)).total_credits, balanceAfterFirst);
    assert.equal(upstream.requests.length, 1);
    assert.equal((await usage(gw, key)).total_requests, 1);

    const other = await client.chat.completions.create(body, { headers: { 'Idempotency-Key': 'order-4712' } });
    assert.notEqual(other.id, first.id);
    assert.equal(upstream.requests.length, 2);
  });

  it('replays an Idempotency-Key on a stream as the same completion', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const body = { model: 'svc-fast', messages: [{ role: 'user', content: 'stream me' }], stream: true };
    const headers = { 'idempotency-key': 'stream-once' };
    const first = parseSse((await call(gw, 'POST', '/v1/chat/completions', { key, body, headers })).text).data;
    const balance = (await credits(gw, key)).total_credits;
    const again = await call(gw, 'POST', '/v1/chat/completions', { key, body, headers });
    assert.equal(again.status, 200);
    const second = parseSse(again.text).data;
    assert.equal(second.at(-1), '[DONE]');
    const chunks = (data: string[]) => data.slice(0, -1).map((d) => JSON.parse(d) as ChatCompletionChunk);
    assert.equal(chunks(second)[0]!.id, chunks(first)[0]!.id);
    assert.equal(chunks(second).map((c) => c.choices[0]?.delta.content ?? '').join(''), REPLY);
    assert.deepEqual(svcOf(chunks(second).at(-1)!), svcOf(chunks(first).at(-1)!));
    assert.equal((await credits(gw, key)).total_credits, balance);
    assert.equal(upstream.requests.length, 1);
  });

  it('refuses an Idempotency-Key whose first request is still running: 409', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const body = { model: 'svc-code', messages: [{ role: 'user', content: 'slow one' }] };
    const headers = { 'idempotency-key': 'in-flight' };
    const first = call(gw, 'POST', '/v1/chat/completions', { key, body, headers });
    for (let i = 0; i < 200 && upstream.requests.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(upstream.requests.length, 1);
    assertError(await call(gw, 'POST', '/v1/chat/completions', { key, body, headers }), 409, 'invalid_request_error', 'idempotency_conflict');
    const done = await first;
    assert.equal(done.status, 200);
    const replay = await call(gw, 'POST', '/v1/chat/completions', { key, body, headers });
    assert.equal((replay.json as { id: string }).id, (done.json as { id: string }).id);
    assert.equal(upstream.requests.length, 1);
  });

  it('refuses an Idempotency-Key reused with another body: 409 idempotency_conflict', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const client = gw.client(key);
    const options = { headers: { 'Idempotency-Key': 'dup-1' } };
    await client.chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'one' }] }, options);
    const balance = (await credits(gw, key)).total_credits;
    await assert.rejects(
      client.chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'two' }] }, options),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.ConflictError, String(err));
        assert.equal(err.status, 409);
        assert.equal(err.code, 'idempotency_conflict');
        assert.equal(err.type, 'invalid_request_error');
        return true;
      },
    );
    assert.equal(upstream.requests.length, 1);
    assert.equal((await credits(gw, key)).total_credits, balance);

    const raw = await call(gw, 'POST', '/v1/chat/completions', {
      key, body: { model: 'svc-fast', messages: [{ role: 'user', content: 'three' }] }, headers: { 'idempotency-key': 'dup-1' },
    });
    assertError(raw, 409, 'invalid_request_error', 'idempotency_conflict');
  });
});
