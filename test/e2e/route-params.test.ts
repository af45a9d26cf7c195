/**
 * Routes whose model takes parameters its own way (OpenAI's reasoning models),
 * and routes that cannot honour a request: skipped, never served without what
 * the caller asked for; a 400 naming the field when no route is left.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertError, call, credits } from '../support/e2e.js';
import { startGateway, useGatewayWithUpstream } from '../support/gateway.js';

function reasoningConfig(url: string): unknown {
  const model = (id: string, routes: Array<Record<string, unknown>>) => ({
    id, name: id, description: id, context_window: 64_000, pricing: { input_credits_per_1k: 4, output_credits_per_1k: 12 },
    routes: routes.map((r) => ({ provider: 'fake', ...r })),
  });
  return {
    providers: [{ id: 'fake', type: 'openai', base_url: url }],
    models: [
      model('reason', [{ model: 'o3-mini' }]),
      model('reason-or-chat', [{ model: 'gpt-5-mini' }, { model: 'chat-ok' }]),
      // A model the gateway knows nothing of, declared by its route.
      model('declared', [{ model: 'house-reasoner', params: { max_tokens_field: 'max_completion_tokens', refuses: ['temperature', 'top_p'] } }]),
    ],
    routing: { first_byte_timeout_ms: 5000 },
  };
}

const messages = [{ role: 'user', content: 'think about it' }];

describe('routes to reasoning models', () => {
  const env = useGatewayWithUpstream(reasoningConfig);

  it('get max_completion_tokens and none of the gateway\'s sampling defaults, and serve', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    const client = gw.client(account.key);
    const params = { model: 'reason', messages: [{ role: 'user' as const, content: 'think about it' }], max_tokens: 50 };
    for (const stream of [false, true]) {
      upstream.reset();
      let finish: string | null | undefined;
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) finish = chunk.choices[0]?.finish_reason ?? finish;
      } else {
        finish = (await client.chat.completions.create(params)).choices[0]!.finish_reason;
      }
      assert.equal(finish, 'stop', `stream: ${stream}`);
      const sent = upstream.requests[0]!.body;
      assert.equal(sent.max_completion_tokens, 50);
      for (const field of ['max_tokens', 'temperature', 'top_p']) assert.equal(field in sent, false, `${field} was sent`);
    }
  });

  it('are skipped when the caller sets what they refuse: the next route serves, or a 400 names the field', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    upstream.reset();
    const served = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'reason-or-chat', messages, temperature: 0.2 } });
    assert.equal(served.status, 200, served.text);
    assert.equal((served.json as { svc: { routed_model: string } }).svc.routed_model, 'chat-ok');
    assert.deepEqual(upstream.requests.map((r) => r.model), ['chat-ok'], 'the reasoning route was never called');
    assert.equal(upstream.requests[0]!.body.temperature, 0.2);

    upstream.reset();
    const before = (await credits(gw, account.key)).total_credits;
    const refused = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'reason', messages, top_p: 0.5 } });
    const error = assertError(refused, 400, 'invalid_request_error', 'invalid_value', 'top_p');
    assert.match(error.message, /top_p/);
    assert.equal(upstream.requests.length, 0);
    assert.equal((await credits(gw, account.key)).total_credits, before, 'nothing charged');
  });

  it('take what a route declares for a model the gateway does not know', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    upstream.reset();
    const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'declared', messages, max_tokens: 30 } });
    assert.equal(res.status, 200, res.text);
    const sent = upstream.requests[0]!.body;
    assert.deepEqual([sent.max_completion_tokens, 'max_tokens' in sent, 'temperature' in sent, 'top_p' in sent], [30, false, false, false]);
    const refused = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'declared', messages, temperature: 1 } });
    assertError(refused, 400, 'invalid_request_error', 'invalid_value', 'temperature');
  });
});

describe('a provider that cannot honour a field', () => {
  it('is skipped rather than served without it: the simulator answers only text', async () => {
    const gw = await startGateway();
    try {
      const account = await gw.createAccount({ purchased: 10_000 });
      const tools = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object', properties: {} } } }];
      const withTools = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'svc-fast', messages, tools } });
      assertError(withTools, 400, 'invalid_request_error', 'invalid_value', 'tools');
      const json = await call(gw, 'POST', '/v1/chat/completions', {
        key: account.key, body: { model: 'svc-fast', messages, response_format: { type: 'json_object' } },
      });
      assertError(json, 400, 'invalid_request_error', 'invalid_value', 'response_format');
      assert.equal((await credits(gw, account.key)).total_credits, 10_000);
      const plain = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'svc-fast', messages, response_format: { type: 'text' } } });
      assert.equal(plain.status, 200, plain.text);
    } finally {
      await gw.close();
    }
  });
});
