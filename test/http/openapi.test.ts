/**
 * GET /openapi.json: a valid OpenAPI 3.1 document that names every route the
 * server registers (and none it does not), whose schemas accept what the
 * server accepts, refuse what it refuses, and describe what it answers.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { RouteOptions } from 'fastify';
import { buildOpenApiDocument } from '../../src/http/openapi.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { fakeUpstreamConfig, startGateway, type TestAccount, type TestGateway } from '../support/gateway.js';
import { call, parseSse } from '../support/e2e.js';

const ADMIN = 'admin-token-for-openapi';

interface Document {
  openapi: string;
  paths: Record<string, Record<string, { security: unknown[]; requestBody?: unknown; responses: Record<string, { content?: Record<string, unknown> }> }>>;
  components: { schemas: Record<string, unknown> };
}

describe('the API document', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  let account: TestAccount;
  let doc: Document;
  const routes: RouteOptions[] = [];
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  const compiled = new Map<string, ValidateFunction>();

  /** Checks a value against a component schema of the document, as any OpenAPI tool would read it. */
  function conforms(name: string, value: unknown): boolean {
    let validate = compiled.get(name);
    if (!validate) {
      validate = ajv.compile({ $ref: `#/components/schemas/${name}`, components: doc.components });
      compiled.set(name, validate);
    }
    return validate(value);
  }
  function assertConforms(name: string, value: unknown): void {
    assert.ok(conforms(name, value), `${name}: ${JSON.stringify(compiled.get(name)?.errors)}\n${JSON.stringify(value)}`);
  }

  before(async () => {
    upstream = await startFakeUpstream();
    gw = await startGateway({ config: fakeUpstreamConfig(upstream.url), adminToken: ADMIN, onRoute: (route) => routes.push(route) });
    account = await gw.createAccount({ purchased: 1_000_000 });
    const res = await call(gw, 'GET', '/openapi.json');
    assert.equal(res.status, 200);
    doc = res.json as Document;
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  it('is served without authentication, and is the document the code builds', () => {
    assert.deepEqual(doc, buildOpenApiDocument());
  });

  it('is valid OpenAPI 3.1', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc as unknown as Record<string, unknown>);
    assert.equal(validator.version, '3.1');
    assert.ok(result.valid, JSON.stringify(result.errors, null, 2));
  });

  it('holds every route the server registers, and nothing else', () => {
    const registered = new Set<string>();
    for (const route of routes) {
      if (route.config?.methodNotAllowed) continue;
      for (const method of [route.method].flat()) {
        if (method === 'HEAD') continue;
        registered.add(`${method.toLowerCase()} ${route.url.replace(/:(\w+)/g, '{$1}')}`);
      }
    }
    assert.ok(registered.size >= 16, `routes seen: ${[...registered].join(', ')}`);
    const documented = new Set(Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`)));
    assert.deepEqual([...registered].filter((r) => !documented.has(r)), [], 'registered but not documented');
    assert.deepEqual([...documented].filter((r) => !registered.has(r)), [], 'documented but not registered');
  });

  it('documents the error body and each status of the contract, the auth schemes and the stream', () => {
    const chat = doc.paths['/v1/chat/completions']!.post!;
    for (const status of ['400', '401', '402', '404', '409', '413', '429', '500', '502', '503', '504']) {
      assert.deepEqual(chat.responses[status]?.content?.['application/json'], { schema: { $ref: '#/components/schemas/Error' } }, status);
    }
    assert.ok(chat.responses['200']?.content?.['text/event-stream']);
    assert.deepEqual(chat.security, [{ api_key: [] }]);
    assert.deepEqual(doc.paths['/admin/v1/upstreams']!.get!.security, [{ admin_token: [] }]);
    assert.deepEqual(doc.paths['/healthz']!.get!.security, []);
    assert.ok(doc.paths['/v1/api-keys/{id}']!.delete!.responses['404']);
  });

  it('accepts a request body the server accepts, and refuses one the server refuses', async () => {
    const accepted = {
      model: 'svc-fast', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hello' }] }],
      temperature: 0.2, max_tokens: 20, stop: ['\n\n'], stream_options: null, user: 'u-1', unknown_field: 'dropped',
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }], tool_choice: 'auto',
    };
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: accepted })).status, 200);
    assertConforms('ChatCompletionRequest', accepted);
    const refused = { model: 'svc-fast', messages: [{ role: 'robot', content: 'Hello' }] };
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: refused })).status, 400);
    assert.equal(conforms('ChatCompletionRequest', refused), false);
    const grant = { kind: 'earned', amount: 100, expires_at: '2030-01-01T00:00:00Z' };
    assert.equal((await call(gw, 'POST', `/admin/v1/accounts/${account.accountId}/grants`, { key: ADMIN, body: grant })).status, 201);
    assertConforms('CreditGrantRequest', grant);
    assert.equal(conforms('CreditGrantRequest', { kind: 'earned', amount: -1 }), false);
  });

  it('describes what the server answers', async () => {
    const key = account.key;
    const completion = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'svc-auto', messages: [{ role: 'user', content: 'Hi' }] } });
    assertConforms('ChatCompletion', completion.json);
    const stream = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } } });
    const chunks = parseSse(stream.text).data.filter((d) => d !== '[DONE]');
    assert.ok(chunks.length > 2);
    for (const chunk of chunks) assertConforms('ChatCompletionChunk', JSON.parse(chunk));
    const answers: Array<[string, string, string, string | null]> = [
      ['Model', 'GET', '/v1/models/svc-fast', key], ['ModelList', 'GET', '/v1/models', key], ['Credits', 'GET', '/v1/credits', key],
      ['Usage', 'GET', '/v1/usage', key], ['ApiKeyList', 'GET', '/v1/api-keys', key], ['Health', 'GET', '/healthz', null],
      ['Readiness', 'GET', '/readyz', null], ['AccountWithCredits', 'GET', `/admin/v1/accounts/${account.accountId}`, ADMIN],
      ['UpstreamList', 'GET', '/admin/v1/upstreams', ADMIN], ['Error', 'GET', '/v1/models/no-such-model', key], ['Error', 'GET', '/v1/credits', 'sk-wrong'],
    ];
    for (const [schema, method, path, auth] of answers) assertConforms(schema, (await call(gw, method, path, { key: auth })).json);
    const created = await call(gw, 'POST', '/v1/api-keys', { key, body: { name: 'doc', daily_credit_limit: 10 } });
    assertConforms('ApiKeyCreated', created.json);
    assertConforms('ApiKeyDeleted', (await call(gw, 'DELETE', `/v1/api-keys/${(created.json as { id: string }).id}`, { key })).json);
    assertConforms('Account', (await call(gw, 'POST', '/admin/v1/accounts', { key: ADMIN, body: { name: 'doc' } })).json);
  });

  it('a document that left a route out would fail the check (the route table is what it is built from)', () => {
    const partial = buildOpenApiDocument([]) as unknown as Document;
    assert.deepEqual(partial.paths, {});
  });
});
