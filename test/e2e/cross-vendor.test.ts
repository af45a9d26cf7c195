/**
 * One alias across vendors, through the official openai SDK: failover from
 * each of OpenAI, Anthropic and Gemini to each other (JSON and streamed), tool
 * calls of Anthropic and Gemini seen as OpenAI `tool_calls`, usage details in
 * OpenAI's shape (cached and reasoning tokens), and routes skipped when their
 * provider cannot honour a field. Billing is always on the serving vendor's
 * own reported usage, which the fakes count in words.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import OpenAI from 'openai';
import type { ChatCompletionChunk } from 'openai/resources/chat/completions';
import { creditsFor } from '../../src/metering/pricing.js';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { ANTHROPIC_CACHE_USAGE, ANTHROPIC_TOOL_ID, ANTHROPIC_TOOL_INPUT_PIECES, ANTHROPIC_TOOL_PREAMBLE } from '../support/fake-anthropic.js';
import { FAKE_CACHED_TOKENS, FAKE_THOUGHT_TEXT, FAKE_THOUGHT_TOKENS, FAKE_TOOL_ARGS } from '../support/fake-gemini.js';
import { countWords, type ReceivedRequest, vendorOf } from '../support/fake-upstream.js';
import { credits, svcOf, type Svc } from '../support/e2e.js';
import { ledgerVerifyCli } from '../support/e2e-helpers.js';
import { useGatewayWithUpstream } from '../support/gateway.js';

const REPLY = 'Sunny and warm, with a light breeze from the west.';
/** Prices high enough that one word more or less changes the charge. */
const PRICE = { input_credits_per_1k: 100, output_credits_per_1k: 1000 };
const QUESTION = 'What is the weather like today?';
const messages = [{ role: 'user' as const, content: QUESTION }];
const PROMPT_WORDS = countWords(QUESTION);

const VENDORS = ['openai', 'anthropic', 'gemini'] as const;
type Vendor = (typeof VENDORS)[number];
const MODES = ['json', 'stream'] as const;
type Mode = (typeof MODES)[number];

/** How each vendor's fake fails before any content, in each mode. */
const FAILURE: Record<Vendor, Record<Mode, string>> = {
  openai: { json: 'error-500', stream: 'reset' },
  anthropic: { json: 'error-529', stream: 'error-event' },
  gemini: { json: 'error-500', stream: 'reset' },
};

const PAIRS: Array<[Vendor, Vendor]> = VENDORS.flatMap((from) => VENDORS.filter((to) => to !== from).map((to): [Vendor, Vendor] => [from, to]));

const failingModel = (from: Vendor, to: Vendor, mode: Mode) => `${from}-before-${to}-${mode}-${FAILURE[from][mode]}`;
const servingModel = (from: Vendor, to: Vendor, mode: Mode) => `${to}-after-${from}-${mode}`;
const failoverAlias = (from: Vendor, to: Vendor, mode: Mode) => `fo-${from}-${to}-${mode}`;

const weatherTool: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] },
  },
};

function config(url: string): unknown {
  const origin = new URL(url).origin;
  const route = (provider: Vendor, model: string) => ({ provider, model });
  const alias = (id: string, routes: Array<{ provider: Vendor; model: string }>) => ({
    id, name: id, description: id, context_window: 64_000, pricing: PRICE, routes,
  });
  const failovers = PAIRS.flatMap(([from, to]) => MODES.map((mode) =>
    alias(failoverAlias(from, to, mode), [route(from, failingModel(from, to, mode)), route(to, servingModel(from, to, mode))])));
  return {
    providers: [
      { id: 'openai', type: 'openai', base_url: url, api_key_env: 'FAKE_UPSTREAM_KEY' },
      { id: 'anthropic', type: 'anthropic', base_url: origin, api_key_env: 'FAKE_UPSTREAM_KEY' },
      { id: 'gemini', type: 'gemini', base_url: origin, api_key_env: 'FAKE_UPSTREAM_KEY' },
    ],
    models: [
      ...failovers,
      alias('tools-anthropic', [route('openai', 'gpt-4o-error-500'), route('anthropic', 'claude-tools')]),
      alias('tools-gemini', [route('anthropic', 'claude-error-529'), route('gemini', 'gemini-tools')]),
      alias('cache-anthropic', [route('anthropic', 'claude-cache')]),
      alias('cache-gemini', [route('gemini', 'gemini-cache')]),
      alias('thoughts-gemini', [route('gemini', 'gemini-thoughts')]),
      alias('anthropic-only', [route('anthropic', 'claude-only')]),
      alias('anthropic-then-openai', [route('anthropic', 'claude-first'), route('openai', 'gpt-4o-second')]),
      alias('anthropic-then-gemini', [route('anthropic', 'claude-first'), route('gemini', 'gemini-second')]),
    ],
    // Far beyond what an answer of the fakes takes: a failover here is never a timeout.
    routing: { first_byte_timeout_ms: 5000 },
  };
}

const received = (requests: ReceivedRequest[]) => requests.map((r) => [vendorOf(r), r.model]);

const cost = (prompt: number, completion: number) => creditsFor(prompt, completion, PRICE);

async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}
const contentOf = (chunks: ChatCompletionChunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');

/** The chunk that carries `finish_reason`: the contract puts `usage` and `svc` on it. */
function finishChunk(chunks: ChatCompletionChunk[]): ChatCompletionChunk & { svc: Svc } {
  const finish = chunks.filter((c) => c.choices[0]?.finish_reason);
  assert.equal(finish.length, 1, `one finish chunk, got ${JSON.stringify(chunks)}`);
  svcOf(finish[0]!);
  return finish[0] as ChatCompletionChunk & { svc: Svc };
}

/** A completion's text, usage and svc, by the SDK, in either mode. */
async function complete(client: OpenAI, model: string, mode: Mode, extra: Partial<OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming> = {}) {
  if (mode === 'json') {
    const completion = await client.chat.completions.create({ model, messages, ...extra });
    assert.equal(completion.model, model);
    return { content: completion.choices[0]!.message.content, finish: completion.choices[0]!.finish_reason, usage: completion.usage, svc: svcOf(completion) };
  }
  const chunks = await collect(await client.chat.completions.create({ model, messages, ...extra, stream: true }));
  const finish = finishChunk(chunks);
  return { content: contentOf(chunks), finish: finish.choices[0]!.finish_reason, usage: finish.usage ?? undefined, svc: finish.svc };
}

describe('across vendors', { timeout: 120_000 }, () => {
  const env = useGatewayWithUpstream(config, { reply: REPLY });
  beforeEach(() => env.upstream.reset());

  it('bills by the fakes\' word counts, which the gateway\'s own count would not give (so the checks below tell them apart)', () => {
    assert.notEqual(cost(PROMPT_WORDS, countWords(REPLY)), creditsFor(countPromptTokens(messages), countTextTokens(REPLY), PRICE));
  });

  for (const [from, to] of PAIRS) {
    for (const mode of MODES) {
      it(`fails over from ${from} (${FAILURE[from][mode]}) to ${to}, ${mode}`, async () => {
        const { gw, upstream } = env;
        const account = await gw.createAccount({ purchased: 100_000 });
        const alias = failoverAlias(from, to, mode);
        const { content, finish, usage, svc } = await complete(gw.client(account.key), alias, mode);

        assert.equal(content, REPLY);
        assert.equal(finish, 'stop');
        assert.deepEqual(received(upstream.requests), [[from, failingModel(from, to, mode)], [to, servingModel(from, to, mode)]]);
        assert.equal(svc.routed_model, servingModel(from, to, mode));
        assert.equal(svc.provider, to);
        assert.equal(svc.requested_model, alias);
        // The serving vendor's own count: prompt and reply in words.
        assert.deepEqual([usage?.prompt_tokens, usage?.completion_tokens], [PROMPT_WORDS, countWords(REPLY)]);
        assert.equal(svc.credits_used, cost(PROMPT_WORDS, countWords(REPLY)));
        const after = await credits(gw, account.key);
        assert.deepEqual([after.total_credits, after.reserved_credits], [100_000 - svc.credits_used, 0]);
        assert.equal(svc.balance_remaining, after.total_credits);
      });
    }
  }

  for (const mode of MODES) {
    it(`turns an Anthropic tool_use (after an OpenAI failure) into OpenAI tool_calls, ${mode}`, async () => {
      const { gw, upstream } = env;
      const account = await gw.createAccount({ purchased: 100_000 });
      const client = gw.client(account.key);
      const { content, calls, finish, usage, svc } = await callTool(client, 'tools-anthropic', mode);
      assert.deepEqual(received(upstream.requests), [['openai', 'gpt-4o-error-500'], ['anthropic', 'claude-tools']]);
      // Anthropic's tools are `{name, input_schema}`: the OpenAI shape would be refused by the fake.
      assert.deepEqual((upstream.requests[1]!.body.tools as Array<{ name: string }>).map((t) => t.name), ['get_weather']);
      assert.equal(finish, 'tool_calls');
      assert.equal(content, ANTHROPIC_TOOL_PREAMBLE);
      assert.equal(calls.length, 1);
      assert.deepEqual({ ...calls[0]!, arguments: JSON.parse(calls[0]!.arguments) as unknown },
        { id: ANTHROPIC_TOOL_ID, name: 'get_weather', arguments: { city: 'Paris', unit: 'C' } });
      const output = countWords(ANTHROPIC_TOOL_PREAMBLE) + countWords(ANTHROPIC_TOOL_INPUT_PIECES.join(''));
      assert.deepEqual([usage?.prompt_tokens, usage?.completion_tokens], [PROMPT_WORDS, output]);
      assert.deepEqual([svc.provider, svc.routed_model, svc.credits_used], ['anthropic', 'claude-tools', cost(PROMPT_WORDS, output)]);
      assert.equal((await credits(gw, account.key)).total_credits, 100_000 - svc.credits_used);
    });

    it(`turns a Gemini functionCall (after an Anthropic failure) into OpenAI tool_calls, ${mode}`, async () => {
      const { gw, upstream } = env;
      const account = await gw.createAccount({ purchased: 100_000 });
      const client = gw.client(account.key);
      const { content, calls, finish, usage, svc } = await callTool(client, 'tools-gemini', mode);
      assert.deepEqual(received(upstream.requests), [['anthropic', 'claude-error-529'], ['gemini', 'gemini-tools']]);
      assert.equal(finish, 'tool_calls');
      assert.ok(content === null || content === '', `no text besides the call: ${String(content)}`);
      assert.equal(calls.length, 1);
      // Gemini gives calls no ids: the gateway makes one, which the caller sends back with the result.
      assert.match(calls[0]!.id, /^call_\w+$/);
      assert.equal(calls[0]!.name, 'get_weather');
      assert.deepEqual(JSON.parse(calls[0]!.arguments), FAKE_TOOL_ARGS);
      const output = countWords(JSON.stringify(FAKE_TOOL_ARGS));
      assert.deepEqual([usage?.prompt_tokens, usage?.completion_tokens], [PROMPT_WORDS, output]);
      assert.deepEqual([svc.provider, svc.routed_model, svc.credits_used], ['gemini', 'gemini-tools', cost(PROMPT_WORDS, output)]);
      assert.equal((await credits(gw, account.key)).total_credits, 100_000 - svc.credits_used);
    });
  }

  for (const mode of MODES) {
    it(`reports Anthropic's cache tokens as prompt_tokens_details.cached_tokens and bills the whole prompt, ${mode}`, async () => {
      const { gw } = env;
      const account = await gw.createAccount({ purchased: 100_000 });
      const { content, usage, svc } = await complete(gw.client(account.key), 'cache-anthropic', mode);
      const { cache_creation_input_tokens: written, cache_read_input_tokens: read } = ANTHROPIC_CACHE_USAGE;
      const prompt = PROMPT_WORDS + written + read;
      const output = countWords(REPLY);
      assert.equal(content, REPLY);
      // Without the cache counts added, prompt_tokens would be the uncached input alone and the caller underbilled.
      assert.deepEqual(usage, { prompt_tokens: prompt, completion_tokens: output, total_tokens: prompt + output, prompt_tokens_details: { cached_tokens: read } });
      assert.equal(svc.credits_used, cost(prompt, output));
      assert.equal((await credits(gw, account.key)).total_credits, 100_000 - svc.credits_used);
    });

    it(`reports Gemini's cached tokens inside prompt_tokens, not added to them, ${mode}`, async () => {
      const { gw } = env;
      const account = await gw.createAccount({ purchased: 100_000 });
      const { content, usage, svc } = await complete(gw.client(account.key), 'cache-gemini', mode);
      const output = countWords(REPLY);
      const cached = Math.min(PROMPT_WORDS, FAKE_CACHED_TOKENS);
      assert.equal(content, REPLY);
      assert.deepEqual(usage, { prompt_tokens: PROMPT_WORDS, completion_tokens: output, total_tokens: PROMPT_WORDS + output, prompt_tokens_details: { cached_tokens: cached } });
      assert.equal(svc.credits_used, cost(PROMPT_WORDS, output));
    });

    it(`counts Gemini's thoughts as completion tokens and reports them as reasoning_tokens, ${mode}`, async () => {
      const { gw } = env;
      const account = await gw.createAccount({ purchased: 100_000 });
      const { content, usage, svc } = await complete(gw.client(account.key), 'thoughts-gemini', mode);
      const output = countWords(REPLY) + FAKE_THOUGHT_TOKENS;
      // The thought itself is never part of the answer.
      assert.equal(content, REPLY);
      assert.ok(!String(content).includes(FAKE_THOUGHT_TEXT));
      assert.deepEqual(usage, {
        prompt_tokens: PROMPT_WORDS, completion_tokens: output, total_tokens: PROMPT_WORDS + output,
        completion_tokens_details: { reasoning_tokens: FAKE_THOUGHT_TOKENS },
      });
      // Thoughts are output the caller pays for.
      assert.equal(svc.credits_used, cost(PROMPT_WORDS, output));
      assert.equal((await credits(gw, account.key)).total_credits, 100_000 - svc.credits_used);
    });
  }

  for (const [field, extra] of [
    ['response_format', { response_format: { type: 'json_object' } }],
    ['seed', { seed: 42 }],
  ] as const) {
    for (const mode of MODES) {
      it(`refuses ${field} on an Anthropic-only alias: 400 invalid_value naming it, nothing sent, nothing charged, ${mode}`, async () => {
        const { gw, upstream } = env;
        const account = await gw.createAccount({ purchased: 100_000 });
        const error = await complete(gw.client(account.key), 'anthropic-only', mode, extra).then(() => null, (err: unknown) => err);
        assert.ok(error instanceof OpenAI.BadRequestError, `expected the SDK's BadRequestError, got ${String(error)}`);
        assert.deepEqual({ code: error.code, type: error.type, param: error.param }, { code: 'invalid_value', type: 'invalid_request_error', param: field });
        assert.deepEqual(upstream.requests, []);
        const after = await credits(gw, account.key);
        assert.deepEqual([after.total_credits, after.reserved_credits], [100_000, 0]);
      });
    }
  }

  for (const mode of MODES) {
    it(`skips the Anthropic route for seed and serves from OpenAI, which gets the seed, ${mode}`, async () => {
      const { gw, upstream } = env;
      const account = await gw.createAccount({ purchased: 100_000 });
      const { content, svc } = await complete(gw.client(account.key), 'anthropic-then-openai', mode, { seed: 42 });
      assert.equal(content, REPLY);
      assert.deepEqual([svc.provider, svc.routed_model], ['openai', 'gpt-4o-second']);
      // Skipped, not tried: Anthropic would have answered (without the seed) and been the one to serve.
      assert.deepEqual(received(upstream.requests), [['openai', 'gpt-4o-second']]);
      assert.equal(upstream.requests[0]!.body.seed, 42);
      assert.equal(svc.credits_used, cost(PROMPT_WORDS, countWords(REPLY)));
    });

    it(`skips the Anthropic route for a JSON response_format and serves from Gemini in JSON mode, ${mode}`, async () => {
      const { gw, upstream } = env;
      const account = await gw.createAccount({ purchased: 100_000 });
      const { svc } = await complete(gw.client(account.key), 'anthropic-then-gemini', mode, { response_format: { type: 'json_object' } });
      assert.deepEqual([svc.provider, svc.routed_model], ['gemini', 'gemini-second']);
      assert.deepEqual(received(upstream.requests), [['gemini', 'gemini-second']]);
      const generation = upstream.requests[0]!.body.generationConfig as Record<string, unknown>;
      assert.equal(generation.responseMimeType, 'application/json');
    });
  }

  it('leaves the ledger clean', async () => {
    const result = await ledgerVerifyCli(env.gw.databaseUrl);
    assert.equal(result.code, 0, result.stdout + result.stderr);
  });
});

interface CalledTool { id: string; name: string; arguments: string }

/** A completion that calls `get_weather`, in either mode, the call assembled as the SDK's user would. */
async function callTool(client: OpenAI, model: string, mode: Mode) {
  const params = { model, messages, tools: [weatherTool] };
  if (mode === 'json') {
    const completion = await client.chat.completions.create(params);
    const message = completion.choices[0]!.message;
    const calls = (message.tool_calls ?? []).map((call): CalledTool => {
      assert.equal(call.type, 'function');
      if (call.type !== 'function') throw new Error('not a function call');
      return { id: call.id, name: call.function.name, arguments: call.function.arguments };
    });
    return { content: message.content, calls, finish: completion.choices[0]!.finish_reason, usage: completion.usage, svc: svcOf(completion) };
  }
  const chunks = await collect(await client.chat.completions.create({ ...params, stream: true }));
  const calls: CalledTool[] = [];
  for (const chunk of chunks) {
    for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
      const call = (calls[delta.index] ??= { id: '', name: '', arguments: '' });
      call.id ||= delta.id ?? '';
      call.name += delta.function?.name ?? '';
      call.arguments += delta.function?.arguments ?? '';
    }
  }
  const finish = finishChunk(chunks);
  return { content: contentOf(chunks), calls, finish: finish.choices[0]!.finish_reason, usage: finish.usage ?? undefined, svc: finish.svc };
}
