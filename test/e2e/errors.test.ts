/**
 * Every error row of the contract, end to end: status, OpenAI error body,
 * check order, the SDK's typed errors, and no 5xx for garbage.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI, { type APIError } from 'openai';
import { countPromptTokens } from '../../src/metering/tokens.js';
import { generateApiKey } from '../../src/keys/secret.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { fakeUpstreamConfig, startGateway, TestClock, type TestGateway } from '../support/gateway.js';
import { assertError, call, countingFetch, credits, queryDb, usage, type ErrorBody } from '../support/e2e.js';

const CHAT = '/v1/chat/completions';
const hi = { model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] };

async function expectSdkError(
  promise: Promise<unknown>, ctor: abstract new (...args: never[]) => APIError, status: number, code: string, type: string,
): Promise<APIError> {
  let caught: unknown;
  await promise.catch((err: unknown) => { caught = err; });
  assert.ok(caught instanceof ctor, `expected ${ctor.name}, got ${String(caught)}`);
  const err = caught as APIError;
  assert.deepEqual({ status: err.status, code: err.code, type: err.type }, { status, code, type });
  return err;
}

describe('errors', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  let rich: string;

  before(async () => {
    upstream = await startFakeUpstream();
    gw = await startGateway({
      config: fakeUpstreamConfig(upstream.url, { 'svc-code': ['a-error-500', 'b-reset'], 'svc-smart': ['a-hang', 'b-hang'] }, { first_byte_timeout_ms: 300 }),
    });
    rich = (await gw.createAccount({ purchased: 1_000_000 })).key;
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  describe('401 authentication', () => {
    it('refuses a missing, non-Bearer, malformed or unknown key with invalid_api_key', async () => {
      const unknown = generateApiKey('live').secret;
      const cases: Array<Record<string, string>> = [
        {},
        { authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` },
        { authorization: rich },
        { authorization: 'Bearer not-a-key' },
        { authorization: 'Bearer svc_live_short' },
        { authorization: `Bearer ${rich}x` },
        { authorization: `Bearer svc_test_${rich.slice('svc_live_'.length)}` },
        { authorization: `Bearer ${unknown}` },
      ];
      for (const headers of cases) {
        assertError(await call(gw, 'POST', CHAT, { body: hi, headers }), 401, 'authentication_error', 'invalid_api_key');
        assertError(await call(gw, 'GET', '/v1/models', { headers }), 401, 'authentication_error', 'invalid_api_key');
      }
      assert.equal(upstream.requests.length, 0);
    });

    it('refuses a revoked key with api_key_revoked', async () => {
      const { key, keyId } = await gw.createAccount({ purchased: 100 });
      assert.equal((await call(gw, 'DELETE', `/v1/api-keys/${keyId}`, { key })).status, 200);
      assertError(await call(gw, 'POST', CHAT, { key, body: hi }), 401, 'authentication_error', 'api_key_revoked');
      assertError(await call(gw, 'POST', CHAT, { key, body: '{' }), 401, 'authentication_error', 'api_key_revoked');
      await expectSdkError(gw.client(key).models.list(), OpenAI.AuthenticationError, 401, 'api_key_revoked', 'authentication_error');
    });
  });

  describe('400 body', () => {
    it('refuses a body that is not JSON or not an object with invalid_json', async () => {
      for (const body of ['{"model": "svc-fast",', 'not json', '[]', '[{"model":"svc-fast"}]', '"text"', '42', 'null', '']) {
        assertError(await call(gw, 'POST', CHAT, { key: rich, body, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request_error', 'invalid_json');
      }
    });

    it('names the invalid field in param', async () => {
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ model: 'svc-fast' }, 'messages'],
        [{ ...hi, messages: [] }, 'messages'],
        [{ ...hi, messages: 'Hi' }, 'messages'],
        [{ messages: hi.messages }, 'model'],
        [{ ...hi, model: 42 }, 'model'],
        [{ ...hi, messages: [{ role: 'wizard', content: 'Hi' }] }, 'messages[0].role'],
        [{ ...hi, messages: [{ role: 'user', content: 'a' }, { role: 'user', content: 7 }] }, 'messages[1].content'],
        [{ ...hi, temperature: 2.5 }, 'temperature'],
        [{ ...hi, temperature: -0.1 }, 'temperature'],
        [{ ...hi, top_p: 1.5 }, 'top_p'],
        [{ ...hi, max_tokens: 0 }, 'max_tokens'],
        [{ ...hi, max_tokens: 2.5 }, 'max_tokens'],
        [{ ...hi, max_completion_tokens: -3 }, 'max_completion_tokens'],
        [{ ...hi, n: 2 }, 'n'],
        [{ ...hi, stream: 'yes' }, 'stream'],
        [{ ...hi, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
      ];
      for (const [body, param] of cases) {
        assertError(await call(gw, 'POST', CHAT, { key: rich, body }), 400, 'invalid_request_error', 'invalid_value', param);
      }
      assert.equal(upstream.requests.length, 0);
    });
  });

  describe('404 model, 400 context', () => {
    it('refuses an unknown model with model_not_found', async () => {
      assertError(await call(gw, 'POST', CHAT, { key: rich, body: { ...hi, model: 'gpt-4o' } }), 404, 'invalid_request_error', 'model_not_found', 'model');
      await expectSdkError(gw.client(rich).chat.completions.create({ ...hi, model: 'nope', messages: [{ role: 'user', content: 'Hi' }] }),
        OpenAI.NotFoundError, 404, 'model_not_found', 'invalid_request_error');
    });

    it('refuses a prompt over the window, or max_tokens that does not fit, with context_length_exceeded', async () => {
      const huge = { model: 'svc-fast', messages: [{ role: 'user', content: 'hello '.repeat(70_000) }] };
      assertError(await call(gw, 'POST', CHAT, { key: rich, body: huge }), 400, 'invalid_request_error', 'context_length_exceeded', 'messages');
      assertError(await call(gw, 'POST', CHAT, { key: rich, body: { ...hi, max_tokens: 64_000 } }), 400, 'invalid_request_error', 'context_length_exceeded', 'messages');
      // Just under the window still fits.
      assert.equal((await call(gw, 'POST', CHAT, { key: rich, body: { ...hi, model: 'svc-fast', max_tokens: 63_000 } })).status, 200);
      const err = await expectSdkError(gw.client(rich).chat.completions.create({ ...hi, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 100_000 }),
        OpenAI.BadRequestError, 400, 'context_length_exceeded', 'invalid_request_error');
      assert.equal(err.param, 'messages');
    });
  });

  describe('402 credits', () => {
    it('refuses max_tokens the credits cannot cover, saying how many output tokens they afford', async () => {
      const { key } = await gw.createAccount({ purchased: 10 });
      const res = await call(gw, 'POST', CHAT, { key, body: { ...hi, max_tokens: 5000 } });
      const error = assertError(res, 402, 'insufficient_credits', 'insufficient_credits');
      assert.equal(res.headers.get('x-should-retry'), 'false');
      const affordable = Math.floor((10_000 - countPromptTokens([{ role: 'user', content: 'Hi' }]) * 4) / 12);
      assert.match(error.message, new RegExp(`\\b${affordable}\\b`));
      assert.equal((await credits(gw, key)).total_credits, 10);
      assert.equal(upstream.requests.length, 0);
    });

    it('refuses an account without credits, and the SDK does not retry it', async () => {
      const { key, accountId } = await gw.createAccount();
      const counter = countingFetch();
      const client = new OpenAI({ apiKey: key, baseURL: gw.baseURL, maxRetries: 2, fetch: counter.fetch });
      const err = await expectSdkError(client.chat.completions.create({ ...hi, messages: [{ role: 'user', content: 'Hi' }] }),
        OpenAI.APIError, 402, 'insufficient_credits', 'insufficient_credits');
      assert.equal(err.constructor, OpenAI.APIError);
      assert.equal(err.headers?.get('x-should-retry'), 'false');
      assert.equal(counter.calls(), 1);
      assert.equal(upstream.requests.length, 0);
      assert.deepEqual(await queryDb(gw, 'SELECT id FROM reservations WHERE account_id = ?', accountId), []);
      assert.equal((await credits(gw, key)).reserved_credits, 0);
    });
  });

  describe('413, 404, 405', () => {
    it('refuses a body over 8 MiB with request_too_large', async () => {
      const big = JSON.stringify({ ...hi, messages: [{ role: 'user', content: 'x'.repeat(9 * 1024 * 1024) }] });
      assertError(await call(gw, 'POST', CHAT, { key: rich, body: big }), 413, 'invalid_request_error', 'request_too_large');
      assert.equal((await call(gw, 'GET', '/healthz')).status, 200);
    });

    it('answers 404 not_found for an unknown path, with or without a key', async () => {
      for (const path of ['/v1/nope', '/v1/chat/completion', '/nope', '/v2/models']) {
        assertError(await call(gw, 'GET', path), 404, 'invalid_request_error', 'not_found');
        assertError(await call(gw, 'GET', path, { key: rich }), 404, 'invalid_request_error', 'not_found');
        assertError(await call(gw, 'POST', path, { key: 'garbage', body: hi }), 404, 'invalid_request_error', 'not_found');
      }
    });

    it('answers 405 method_not_allowed for a known path with another method', async () => {
      const cases: Array<[string, string]> = [['DELETE', '/v1/models'], ['PUT', CHAT], ['GET', CHAT], ['POST', '/v1/credits'], ['PATCH', '/v1/usage']];
      for (const [method, path] of cases) {
        assertError(await call(gw, method, path, { key: rich, body: method === 'GET' ? undefined : {} }), 405, 'invalid_request_error', 'method_not_allowed');
      }
    });
  });

  describe('502, 504 upstreams', () => {
    it('answers 502 upstream_unavailable when every route fails, and charges nothing', async () => {
      const { key } = await gw.createAccount({ purchased: 1000 });
      const body = { ...hi, model: 'svc-code' };
      assertError(await call(gw, 'POST', CHAT, { key, body }), 502, 'upstream_error', 'upstream_unavailable');
      assertError(await call(gw, 'POST', CHAT, { key, body: { ...body, stream: true } }), 502, 'upstream_error', 'upstream_unavailable');
      await expectSdkError(gw.client(key).chat.completions.create({ ...hi, model: 'svc-code', messages: [{ role: 'user', content: 'Hi' }] }),
        OpenAI.InternalServerError, 502, 'upstream_unavailable', 'upstream_error');
      assert.deepEqual(upstream.requests.map((r) => r.model), Array(3).fill(['a-error-500', 'b-reset']).flat());
      const after = await credits(gw, key);
      assert.deepEqual([after.total_credits, after.reserved_credits], [1000, 0]);
      const used = await usage(gw, key);
      assert.deepEqual([used.total_requests, used.total_credits_spent], [0, 0]);
    });

    it('answers 504 upstream_timeout when every route hangs', async () => {
      const { key } = await gw.createAccount({ purchased: 1000 });
      const body = { ...hi, model: 'svc-smart' };
      assertError(await call(gw, 'POST', CHAT, { key, body }), 504, 'upstream_error', 'upstream_timeout');
      await expectSdkError(gw.client(key).chat.completions.create({ ...hi, model: 'svc-smart', messages: [{ role: 'user', content: 'Hi' }], stream: true }),
        OpenAI.InternalServerError, 504, 'upstream_timeout', 'upstream_error');
      assert.deepEqual(upstream.requests.map((r) => r.model), ['a-hang', 'b-hang', 'a-hang', 'b-hang']);
      assert.equal((await credits(gw, key)).total_credits, 1000);
      assert.equal((await usage(gw, key)).total_requests, 0);
    });
  });

  describe('check order', () => {
    it('authenticates first, then the body, then the model, then the context, then credits', async () => {
      const { key: empty } = await gw.createAccount();
      const huge = 'hello '.repeat(70_000);
      assertError(await call(gw, 'POST', CHAT, { body: '{' }), 401, 'authentication_error', 'invalid_api_key');
      assertError(await call(gw, 'POST', CHAT, { key: 'svc_live_bad', body: { model: 'nope', messages: 'x' } }), 401, 'authentication_error', 'invalid_api_key');
      assertError(await call(gw, 'POST', CHAT, { key: rich, body: { model: 'nope', messages: 'x' } }), 400, 'invalid_request_error', 'invalid_value', 'messages');
      assertError(await call(gw, 'POST', CHAT, { key: empty, body: { model: 'nope', messages: [{ role: 'user', content: huge }] } }),
        404, 'invalid_request_error', 'model_not_found', 'model');
      assertError(await call(gw, 'POST', CHAT, { key: empty, body: { model: 'svc-fast', messages: [{ role: 'user', content: huge }] } }),
        400, 'invalid_request_error', 'context_length_exceeded', 'messages');
      assertError(await call(gw, 'POST', CHAT, { key: empty, body: { ...hi, max_tokens: 64_000 } }), 400, 'invalid_request_error', 'context_length_exceeded', 'messages');
      assertError(await call(gw, 'POST', CHAT, { key: empty, body: hi }), 402, 'insufficient_credits', 'insufficient_credits');
    });
  });

  describe('no 5xx for garbage', () => {
    it('answers every malformed request with a 4xx OpenAI error and keeps serving', async () => {
      const msg = [{ role: 'user', content: 'Hi' }];
      const bodies: unknown[] = [
        { model: null, messages: null }, { model: 'svc-fast', messages: [null] }, { model: 'svc-fast', messages: [[]] },
        { model: 'svc-fast', messages: [{ role: null, content: null }] }, { model: 'svc-fast', messages: [{ role: 'user' }] },
        { model: 'svc-fast', messages: [{ content: 'Hi' }] }, { model: 'svc-fast', messages: { 0: msg[0] } },
        { model: 'svc-fast', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] },
        { model: 'svc-fast', messages: [{ role: 'user', content: [null] }] },
        { ...hi, max_tokens: 1e300 }, { ...hi, max_tokens: Number.MAX_SAFE_INTEGER + 2 }, { ...hi, max_tokens: -1 },
        { ...hi, temperature: '0.5' }, { ...hi, temperature: null, top_p: 'high' }, { ...hi, stream: 1 }, { ...hi, n: '1' },
        { ...hi, stop: [1, 2] }, { ...hi, seed: 1.5 }, { ...hi, user: 5 }, { ...hi, tools: 'x' }, { ...hi, tool_choice: 5 },
        { ...hi, response_format: { type: 'xml' } }, { ...hi, stream_options: [] }, { ...hi, presence_penalty: 3 },
        { model: '\u0000', messages: msg }, { model: 'svc-fast\ud800', messages: msg }, { model: '🚀'.repeat(1000), messages: msg },
        { model: 'svc-fast', messages: [{ role: 'user', content: 'x', name: { nested: { deeper: null } } }] },
        { __proto__: null, constructor: { prototype: { polluted: true } }, model: 'svc-fast' },
      ];
      const raws: string[] = [
        '{"model":"svc-fast","messages":[{"role":"user","content":"Hi"}],"max_tokens":1e999}',
        `{"model":"svc-fast","messages":${'['.repeat(5000)}${']'.repeat(5000)}}`,
        '['.repeat(10_000) + ']'.repeat(10_000),
        '{"__proto__":{"model":"svc-fast"}}', '\u0000', '{"model":"svc-fast","messages":[{"role":"user","content":"\\ud800"}],"n":0}',
        '{"model": "svc-fast", "messages": [}', 'model=svc-fast&messages=hi',
      ];
      const results = [
        ...(await Promise.all(bodies.map((body) => call(gw, 'POST', CHAT, { key: rich, body })))),
        ...(await Promise.all(raws.map((body) => call(gw, 'POST', CHAT, { key: rich, body })))),
        await call(gw, 'POST', CHAT, { key: rich, body: Buffer.from([0xff, 0xfe, 0x00, 0x7b]) }),
        await call(gw, 'POST', CHAT, { key: rich, body: 'model=svc-fast', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
        await call(gw, 'POST', CHAT, { body: hi, headers: { authorization: 'Bearer ' + 'x'.repeat(20_000) } }),
        await call(gw, 'POST', CHAT, { body: hi, headers: { authorization: 'Bearer \u00ff\u00fe' } }),
        await call(gw, 'POST', CHAT, { body: hi, headers: { authorization: 'Bearer' } }),
        await call(gw, 'GET', '/v1/usage?start_date[]=1&end_date=%00', { key: rich }),
      ];
      for (const [i, res] of results.entries()) {
        assert.ok(res.status >= 400 && res.status < 500, `case ${i}: ${res.status} ${res.text.slice(0, 200)}`);
        const body = res.json as ErrorBody;
        assert.deepEqual(Object.keys(body.error ?? {}).sort(), ['code', 'message', 'param', 'type'], `case ${i}: ${res.text.slice(0, 200)}`);
      }
      assert.equal(upstream.requests.length, 0);
      assert.equal((await call(gw, 'GET', '/healthz')).status, 200);
      assert.equal((await call(gw, 'POST', CHAT, { key: rich, body: hi })).status, 200);
    });

    it('answers a header block over the size limit with the OpenAI error body', async () => {
      const res = await call(gw, 'GET', '/v1/models', { key: rich, headers: { 'x-padding': 'x'.repeat(20_000) } });
      assertError(res, 431, 'invalid_request_error', 'request_too_large');
      assert.equal((await call(gw, 'GET', '/v1/models', { key: rich })).status, 200);
    });

    it('answers a path with broken percent-encoding with the OpenAI error body', async () => {
      for (const path of ['/v1/models/%00%ff', '/v1/models/%E0%A4%A', '/v1/%zz']) {
        const res = await call(gw, 'GET', path, { key: rich });
        assert.ok(res.status === 400 || res.status === 404, `${path}: ${res.status}`);
        assertError(res, res.status, 'invalid_request_error', res.status === 404 ? 'not_found' : 'invalid_value');
      }
    });
  });
});

describe('daily credit cap (429)', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  const clock = new TestClock('2026-11-21T18:30:00Z');

  before(async () => {
    upstream = await startFakeUpstream();
    gw = await startGateway({ upstreamUrl: upstream.url, clock });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  const assertCapped = (res: Awaited<ReturnType<typeof call>>) => {
    assertError(res, 429, 'rate_limit_error', 'daily_credit_limit_exceeded');
    assert.equal(res.headers.get('retry-after'), String(5.5 * 3600));
    assert.equal(res.headers.get('x-should-retry'), 'false');
  };

  it('refuses once the cap is spent, with Retry-After to 00:00 UTC, and lets the key go the next day', async () => {
    const { key } = await gw.createAccount({ purchased: 1000, key: { dailyCreditLimit: 1 } });
    assert.equal((await call(gw, 'POST', CHAT, { key, body: hi })).status, 200);
    assertCapped(await call(gw, 'POST', CHAT, { key, body: hi }));
    assert.equal((await credits(gw, key)).total_credits, 999);
    clock.set('2026-11-22T00:00:01Z');
    try {
      assert.equal((await call(gw, 'POST', CHAT, { key, body: hi })).status, 200);
    } finally {
      clock.set('2026-11-21T18:30:00Z');
    }
  });

  it('refuses an explicit max_tokens whose reservation passes the cap', async () => {
    const { key } = await gw.createAccount({ purchased: 1000, key: { dailyCreditLimit: 5 } });
    assertCapped(await call(gw, 'POST', CHAT, { key, body: { ...hi, max_tokens: 1000 } }));
    assert.equal((await call(gw, 'POST', CHAT, { key, body: { ...hi, max_tokens: 100 } })).status, 200);
  });

  it('answers 429, not 402, when the cap is reached on an empty account; the SDK raises RateLimitError and does not retry', async () => {
    const { key } = await gw.createAccount({ key: { dailyCreditLimit: 0 } });
    assertCapped(await call(gw, 'POST', CHAT, { key, body: hi }));
    const counter = countingFetch();
    const client = new OpenAI({ apiKey: key, baseURL: gw.baseURL, maxRetries: 2, fetch: counter.fetch });
    await expectSdkError(client.chat.completions.create({ ...hi, messages: [{ role: 'user', content: 'Hi' }] }),
      OpenAI.RateLimitError, 429, 'daily_credit_limit_exceeded', 'rate_limit_error');
    assert.equal(counter.calls(), 1);
  });
});
