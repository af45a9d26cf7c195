/**
 * Regressions from review: a broken upstream cannot drain an account, a cut
 * stream is not charged twice under one Idempotency-Key, a slow JSON answer is
 * not mistaken for a dead upstream, and svc-auto refuses what no class can hold.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fakeUpstreamConfig, useGatewayWithUpstream } from '../support/gateway.js';
import { assertError, call, credits } from '../support/e2e.js';
import { countPromptTokens } from '../../src/metering/tokens.js';

interface Completion { id: string; choices: Array<{ message: { content: string } }>; svc: { credits_used: number } }

describe('hardening', () => {
  const env = useGatewayWithUpstream((url) => fakeUpstreamConfig(url, {
    'svc-fast': ['svc-fast-inflated'], 'svc-code': ['svc-code-cut'], 'svc-smart': ['svc-smart-stall-600'],
  }, { first_byte_timeout_ms: 300 }), { reply: 'one two three four five six seven eight' });

  it('bills no more output than the max_tokens it sent, and no prompt far beyond its own estimate', async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key: account.key, body: { model: 'svc-fast', max_tokens: 10, messages: [{ role: 'user', content: 'hello there' }] },
    });
    assert.equal(res.status, 200, res.text);
    const completion = res.json as Completion & { usage: { prompt_tokens: number; completion_tokens: number } };
    assert.equal(completion.usage.completion_tokens, 10, 'capped at max_tokens');
    // The upstream claims a million prompt tokens; the gateway believes at most twice its own count, plus 64.
    const believed = 2 * countPromptTokens([{ role: 'user', content: 'hello there' }]) + 64;
    assert.equal(completion.usage.prompt_tokens, believed);
    assert.equal(completion.svc.credits_used, Math.ceil((believed * 4 + 10 * 12) / 1000));
    assert.equal((await credits(gw, account.key)).total_credits, 100_000 - completion.svc.credits_used);
  });

  it('keeps a cut stream under its Idempotency-Key: the retry replays it and pays nothing', async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const request = {
      key: account.key, headers: { 'idempotency-key': 'cut-once' },
      body: { model: 'svc-code', stream: true, messages: [{ role: 'user', content: 'go' }] },
    };
    const first = await call(gw, 'POST', '/v1/chat/completions', request);
    assert.equal(first.status, 200);
    assert.match(first.text, /"error":\{/, 'the cut reached the client as an error chunk');
    const spent = 100_000 - (await credits(gw, account.key)).total_credits;
    assert.ok(spent > 0);
    const retry = await call(gw, 'POST', '/v1/chat/completions', request);
    assert.equal(retry.status, 200);
    assert.equal(retry.headers.get('idempotent-replayed'), 'true');
    // Replayed as it was: the delivered words, then the same error chunk, never a clean finish.
    // Each request names its own id in the message; the rest of the chunk is the same.
    const errorChunk = (text: string) => text.split('\n').find((line) => line.startsWith('data: {"error"'))
      ?.replace(/ \(request id: [\w-]+\)/, '');
    assert.ok(errorChunk(retry.text), retry.text);
    assert.equal(errorChunk(retry.text), errorChunk(first.text));
    assert.doesNotMatch(retry.text, /"finish_reason":"stop"/);
    assert.equal(100_000 - (await credits(gw, account.key)).total_credits, spent, 'charged once');
  });

  it('serves a JSON completion that takes longer than the first-byte timeout once it has begun', async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key: account.key, body: { model: 'svc-smart', messages: [{ role: 'user', content: 'take your time' }] },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal((res.json as Completion).choices[0]!.message.content, 'one two three four five six seven eight');
  });

  it('refuses an Idempotency-Key it could not honour', async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key: account.key, headers: { 'idempotency-key': 'k'.repeat(256) },
      body: { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] },
    });
    assertError(res, 400, 'invalid_request_error', 'invalid_value', 'Idempotency-Key');
    assert.equal((await credits(gw, account.key)).total_credits, 100_000);
  });
});

describe('svc-auto when no class can hold the prompt', () => {
  const env = useGatewayWithUpstream((url) => {
    const config = fakeUpstreamConfig(url) as { models: Array<{ id: string; context_window: number }> };
    for (const m of config.models) if (m.id !== 'svc-auto') m.context_window = 1000;
    return config;
  });

  it('answers 400 context_length_exceeded, not 500, and charges nothing', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key: account.key, body: { model: 'svc-auto', messages: [{ role: 'user', content: 'word '.repeat(3000) }] },
    });
    assertError(res, 400, 'invalid_request_error', 'context_length_exceeded', 'messages');
    assert.equal((await credits(gw, account.key)).total_credits, 100_000);
    assert.equal(upstream.requests.length, 0);
  });
});
