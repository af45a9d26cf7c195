/**
 * An answer that survives a dying stream: when a route dies after content
 * reached the client, a following route that can continue takes the delivered
 * text as an assistant prefix and streams the rest; the client sees one answer
 * and pays its prompt once plus every output token it received.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import { creditsFor } from '../../src/metering/pricing.js';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { call, credits, parseSse, type Svc } from '../support/e2e.js';
import { ledgerVerifyCli } from '../support/e2e-helpers.js';
import { useGatewayWithUpstream } from '../support/gateway.js';

const REPLY = 'one two three four five six seven eight';
const PRICE = { input_credits_per_1k: 4, output_credits_per_1k: 12 };
const MESSAGES = [{ role: 'user' as const, content: 'count for me' }];

function config(url: string): unknown {
  const model = (id: string, routes: Array<Record<string, unknown>>) => ({
    id, name: id, description: id, context_window: 64_000, pricing: PRICE, routes: routes.map((r) => ({ provider: 'fake', ...r })),
  });
  return {
    providers: [{ id: 'fake', type: 'openai', base_url: url }],
    models: [
      model('continued', [{ model: 'first-cut' }, { model: 'second-ok', continue: true }]),
      model('no-continuer', [{ model: 'first-cut' }, { model: 'second-ok' }]),
      model('continuer-fails', [{ model: 'first-cut' }, { model: 'second-error-500', continue: true }]),
      model('client-leaves', [{ model: 'first-stall-3000' }, { model: 'second-ok', continue: true }]),
    ],
    routing: { first_byte_timeout_ms: 5000 },
  };
}

interface Chunk { choices?: Array<{ delta: { content?: string } }>; svc?: Svc; error?: { code: string } }

function read(text: string): { content: string; chunks: Chunk[] } {
  const chunks = parseSse(text).data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Chunk);
  return { content: chunks.map((c) => c.choices?.[0]?.delta.content ?? '').join(''), chunks };
}

/** What the caller pays: its prompt once (the gateway's count) and every output token it received. */
function owed(content: string): number {
  return creditsFor(countPromptTokens(MESSAGES), countTextTokens(content), PRICE);
}

describe('continuing an answer on another route', { timeout: 30_000 }, () => {
  const env = useGatewayWithUpstream(config, { reply: REPLY });

  it('streams one uninterrupted answer, sends the delivered text as the prefix, and charges what the client received', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    upstream.reset();
    const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'continued', stream: true, messages: MESSAGES } });
    const { content, chunks } = read(res.text);
    assert.equal(content, REPLY, 'no word lost, none repeated');
    assert.ok(!chunks.some((c) => c.error), res.text);
    const svc = chunks.find((c) => c.svc)!.svc!;
    assert.deepEqual(svc.routes, [{ provider: 'fake', model: 'first-cut' }, { provider: 'fake', model: 'second-ok' }]);
    assert.equal(svc.routed_model, 'second-ok');
    assert.equal(svc.credits_used, owed(REPLY));
    assert.equal((await credits(gw, account.key)).total_credits, 10_000 - owed(REPLY));

    const [, second] = upstream.requests;
    const sent = second!.body as { messages: Array<{ role: string; content: string }>; continue_final_message?: boolean; add_generation_prompt?: boolean };
    assert.deepEqual(sent.messages.at(-1), { role: 'assistant', content: 'one two' });
    assert.deepEqual([sent.continue_final_message, sent.add_generation_prompt], [true, false]);
  });

  it('without a route that continues, ends with the error chunk as before', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    upstream.reset();
    const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'no-continuer', stream: true, messages: MESSAGES } });
    const { content, chunks } = read(res.text);
    assert.equal(content, 'one two');
    assert.equal(chunks.at(-1)?.error?.code, 'upstream_unavailable');
    assert.deepEqual(upstream.requests.map((r) => r.model), ['first-cut'], 'a route that cannot continue is not asked to start over');
    assert.equal((await credits(gw, account.key)).total_credits, 10_000 - owed('one two'));
  });

  it('a JSON request whose route dies midway is served whole by the next route, and pays only for that answer', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    upstream.reset();
    const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'no-continuer', messages: MESSAGES } });
    assert.equal(res.status, 200, res.text);
    const completion = res.json as { choices: Array<{ message: { content: string } }>; usage: { prompt_tokens: number; completion_tokens: number }; svc: Svc };
    assert.equal(completion.choices[0]!.message.content, REPLY);
    assert.equal(completion.svc.routed_model, 'second-ok');
    assert.deepEqual(upstream.requests.map((r) => r.model), ['first-cut', 'second-ok']);
    // Nothing of the first reached the client: the caller pays the second route's answer, by its usage.
    const charged = creditsFor(completion.usage.prompt_tokens, completion.usage.completion_tokens, PRICE);
    assert.equal(completion.svc.credits_used, charged);
    assert.equal((await credits(gw, account.key)).total_credits, 10_000 - charged);
  });

  it('when the continuation fails too, ends with the error chunk and charges what was delivered', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    upstream.reset();
    const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'continuer-fails', stream: true, messages: MESSAGES } });
    const { content, chunks } = read(res.text);
    assert.equal(content, 'one two');
    assert.equal(chunks.at(-1)?.error?.code, 'upstream_unavailable');
    assert.deepEqual(upstream.requests.map((r) => r.model), ['first-cut', 'second-error-500']);
    assert.equal(chunks.at(-1)?.svc?.credits_used, owed('one two'));
    assert.equal((await credits(gw, account.key)).total_credits, 10_000 - owed('one two'));
  });

  it('a client that left meanwhile gets nothing more sent upstream for it', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    upstream.reset();
    const leaving = new AbortController();
    const response = await fetch(`${gw.baseURL}/chat/completions`, {
      method: 'POST', signal: leaving.signal,
      headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'client-leaves', stream: true, messages: MESSAGES }),
    });
    const reader = response.body!.getReader();
    let seen = '';
    while (!seen.includes('"content":"one"')) seen += new TextDecoder().decode((await reader.read()).value);
    leaving.abort();
    await sleep(500);
    assert.deepEqual(upstream.requests.map((r) => r.model), ['first-stall-3000']);
    const after = await credits(gw, account.key);
    assert.deepEqual([after.total_credits, after.reserved_credits], [10_000 - owed('one'), 0]);
  });

  it('leaves the ledger clean', async () => {
    assert.equal((await ledgerVerifyCli(env.gw.databaseUrl)).code, 0);
  });
});
