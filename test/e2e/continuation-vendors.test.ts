/**
 * Continuing a cut answer across vendors: a stream that dies after content is
 * continued by a later route whose provider can (Anthropic always, an OpenAI
 * route with `continue: true`, Gemini never), with the delivered text as the
 * final assistant turn in that provider's own format. The client sees one
 * answer, `svc.routes` names every route that contributed, and the charge is
 * the prompt once plus every output token delivered, by the gateway's count.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { creditsFor } from '../../src/metering/pricing.js';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { vendorOf, type ReceivedRequest, type Vendor } from '../support/fake-upstream.js';
import { call, credits, parseSse, svcOf, type Svc } from '../support/e2e.js';
import { ledgerVerifyCli } from '../support/e2e-helpers.js';
import { useGatewayWithUpstream } from '../support/gateway.js';

const REPLY = 'one two three four five six seven eight';
/** What every fake's `cut` delivers before it dies: its first two words. */
const DELIVERED = 'one two';
const PRICE = { input_credits_per_1k: 100, output_credits_per_1k: 1000 };
const QUESTION = 'count for me';
const MESSAGES = [{ role: 'user' as const, content: QUESTION }];

interface Route { provider: Vendor; model: string; continue?: boolean }

/** Each alias's routes; model names are unique so that no breaker links one case to another. */
const ALIASES: Record<string, Route[]> = {
  'openai-then-anthropic': [{ provider: 'openai', model: 'oa-cut-before-claude' }, { provider: 'anthropic', model: 'claude-after-oa' }],
  'anthropic-then-openai': [{ provider: 'anthropic', model: 'claude-cut-before-oa' }, { provider: 'openai', model: 'oa-after-claude', continue: true }],
  'gemini-then-anthropic': [{ provider: 'gemini', model: 'gemini-cut-before-claude' }, { provider: 'anthropic', model: 'claude-after-gemini' }],
  'anthropic-then-gemini': [{ provider: 'anthropic', model: 'claude-cut-before-gemini' }, { provider: 'gemini', model: 'gemini-after-claude' }],
  'anthropic-past-gemini': [
    { provider: 'anthropic', model: 'claude-cut-past-gemini' }, { provider: 'gemini', model: 'gemini-passed-over' },
    { provider: 'openai', model: 'oa-after-gemini', continue: true },
  ],
  'continuation-fails': [{ provider: 'openai', model: 'oa-cut-then-fail' }, { provider: 'anthropic', model: 'claude-error-529-continuing' }],
};

function config(url: string): unknown {
  const origin = new URL(url).origin;
  return {
    providers: [
      { id: 'openai', type: 'openai', base_url: url, api_key_env: 'FAKE_UPSTREAM_KEY' },
      { id: 'anthropic', type: 'anthropic', base_url: origin, api_key_env: 'FAKE_UPSTREAM_KEY' },
      { id: 'gemini', type: 'gemini', base_url: origin, api_key_env: 'FAKE_UPSTREAM_KEY' },
    ],
    models: Object.entries(ALIASES).map(([id, routes]) => ({ id, name: id, description: id, context_window: 64_000, pricing: PRICE, routes })),
    routing: { first_byte_timeout_ms: 5000 },
  };
}

const received = (requests: ReceivedRequest[]) => requests.map((r) => [vendorOf(r), r.model]);

/** What the caller pays: its prompt once and every output token it received, both by the gateway's count. */
function owed(content: string): number {
  return creditsFor(countPromptTokens(MESSAGES), countTextTokens(content), PRICE);
}

type Chunk = Partial<ChatCompletionChunk> & { svc?: Svc; error?: { code: string; type: string } };

/** A streamed completion by raw HTTP, which shows the error chunk the SDK would throw on. */
async function stream(gw: { origin: string }, key: string, model: string): Promise<{ content: string; chunks: Chunk[] }> {
  const res = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model, stream: true, messages: MESSAGES } });
  assert.equal(res.status, 200, res.text);
  const data = parseSse(res.text).data;
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as Chunk);
  return { content: chunks.map((c) => c.choices?.[0]?.delta.content ?? '').join(''), chunks };
}

describe('continuing a cut answer on another vendor', { timeout: 60_000 }, () => {
  const env = useGatewayWithUpstream(config, { reply: REPLY });
  beforeEach(() => env.upstream.reset());

  /** Streams the alias through the SDK; asserts one whole answer, the routes, the charge; returns the continuing request. */
  async function continued(alias: string, expectedRequests: Array<[Vendor, string]>): Promise<ReceivedRequest> {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of await gw.client(account.key).chat.completions.create({ model: alias, messages: MESSAGES, stream: true })) chunks.push(chunk);
    // Without the continuation the SDK would throw on the error chunk after 'one two'.
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), REPLY, 'no word lost, none repeated');
    const finish = chunks.find((c) => c.choices[0]?.finish_reason);
    assert.equal(finish?.choices[0]?.finish_reason, 'stop');
    const svc = svcOf(finish!);
    // Every route asked contributed: the cut one and the one that finished.
    const routes = expectedRequests.map(([provider, model]) => ({ provider, model }));
    assert.deepEqual(svc.routes, routes);
    assert.deepEqual([svc.provider, svc.routed_model], [routes.at(-1)!.provider, routes.at(-1)!.model]);
    assert.deepEqual(received(upstream.requests), expectedRequests);
    // The prompt once (not once per route) and the whole answer, by the gateway's count (no one route saw all of it).
    assert.deepEqual([finish!.usage?.prompt_tokens, finish!.usage?.completion_tokens], [countPromptTokens(MESSAGES), countTextTokens(REPLY)]);
    assert.equal(svc.credits_used, owed(REPLY));
    const after = await credits(gw, account.key);
    assert.deepEqual([after.total_credits, after.reserved_credits], [100_000 - owed(REPLY), 0]);
    return upstream.requests.at(-1)!;
  }

  it('an OpenAI stream cut after content is continued by Anthropic natively, the delivered text as the final assistant turn', async () => {
    const sent = await continued('openai-then-anthropic', [['openai', 'oa-cut-before-claude'], ['anthropic', 'claude-after-oa']]);
    const messages = sent.body.messages as unknown[];
    assert.deepEqual(messages, [
      { role: 'user', content: [{ type: 'text', text: QUESTION }] },
      { role: 'assistant', content: [{ type: 'text', text: DELIVERED }] },
    ]);
    // vLLM's fields have no place in Anthropic's request (the fake, as Anthropic, would refuse them anyway).
    assert.ok(!('continue_final_message' in sent.body) && !('add_generation_prompt' in sent.body), JSON.stringify(sent.body));
  });

  it('an Anthropic stream cut after content is continued by an OpenAI route with continue: true', async () => {
    const sent = await continued('anthropic-then-openai', [['anthropic', 'claude-cut-before-oa'], ['openai', 'oa-after-claude']]);
    const body = sent.body as { messages: unknown[]; continue_final_message?: boolean; add_generation_prompt?: boolean };
    assert.deepEqual(body.messages.at(-1), { role: 'assistant', content: DELIVERED });
    assert.deepEqual([body.continue_final_message, body.add_generation_prompt], [true, false]);
  });

  it('a Gemini stream cut after content is continued by Anthropic', async () => {
    const sent = await continued('gemini-then-anthropic', [['gemini', 'gemini-cut-before-claude'], ['anthropic', 'claude-after-gemini']]);
    assert.deepEqual((sent.body.messages as unknown[]).at(-1), { role: 'assistant', content: [{ type: 'text', text: DELIVERED }] });
  });

  it('passes over a Gemini route (which cannot continue) to a later route that can', async () => {
    const sent = await continued('anthropic-past-gemini', [['anthropic', 'claude-cut-past-gemini'], ['openai', 'oa-after-gemini']]);
    assert.deepEqual((sent.body.messages as unknown[]).at(-1), { role: 'assistant', content: DELIVERED });
  });

  it('with only Gemini after the cut, ends with the error chunk, never asks Gemini, and charges what was delivered', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const { content, chunks } = await stream(gw, account.key, 'anthropic-then-gemini');
    assert.equal(content, DELIVERED);
    const last = chunks.at(-1)!;
    assert.deepEqual([last.error?.type, last.error?.code], ['upstream_error', 'upstream_unavailable']);
    // Gemini would start the answer over from the beginning: the client would read 'one two' twice.
    assert.deepEqual(received(upstream.requests), [['anthropic', 'claude-cut-before-gemini']]);
    assert.equal(last.svc?.credits_used, owed(DELIVERED));
    assert.equal(last.svc?.routes, undefined, 'one route contributed');
    const after = await credits(gw, account.key);
    assert.deepEqual([after.total_credits, after.reserved_credits], [100_000 - owed(DELIVERED), 0]);
  });

  it('when the continuation fails too (Anthropic overloaded), ends with the error chunk and charges prompt plus delivered', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const { content, chunks } = await stream(gw, account.key, 'continuation-fails');
    assert.equal(content, DELIVERED);
    const last = chunks.at(-1)!;
    assert.deepEqual([last.error?.type, last.error?.code], ['upstream_error', 'upstream_unavailable']);
    assert.deepEqual(received(upstream.requests), [['openai', 'oa-cut-then-fail'], ['anthropic', 'claude-error-529-continuing']]);
    assert.deepEqual((upstream.requests[1]!.body.messages as unknown[]).at(-1), { role: 'assistant', content: [{ type: 'text', text: DELIVERED }] });
    assert.equal(last.svc?.credits_used, owed(DELIVERED));
    const after = await credits(gw, account.key);
    assert.deepEqual([after.total_credits, after.reserved_credits], [100_000 - owed(DELIVERED), 0]);
  });

  it('leaves the ledger clean', async () => {
    const result = await ledgerVerifyCli(env.gw.databaseUrl);
    assert.equal(result.code, 0, result.stdout + result.stderr);
  });
});
