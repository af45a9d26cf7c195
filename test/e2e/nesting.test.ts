/**
 * Deeply nested or oversized free-form JSON (tool parameters, response_format,
 * tool_choice, unknown fields, the body itself) is a 400 naming the field,
 * before any money moves or any upstream is called, and never a 500 from a
 * stack overflow in the gateway's own JSON handling.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { fakeUpstreamConfig, useGatewayWithUpstream } from '../support/gateway.js';
import { assertError, call, credits } from '../support/e2e.js';

const CHAT = '/v1/chat/completions';

/** `depth` objects nested in one another, as JSON text (built as text: JSON.stringify would overflow). */
function nestedObjects(depth: number): string {
  return `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;
}

/** A chat body as JSON text, with `fields` (raw JSON text each) after model and messages. */
function chatBody(fields: Record<string, string>): string {
  const parts = ['"model":"svc-fast"', '"messages":[{"role":"user","content":"Hi"}]'];
  for (const [name, json] of Object.entries(fields)) parts.push(`${JSON.stringify(name)}:${json}`);
  return `{${parts.join(',')}}`;
}

function toolWith(parameters: string, extra = ''): string {
  return `[{"type":"function",${extra}"function":{"name":"f","parameters":${parameters}}}]`;
}

describe('nesting and size bounds on free-form JSON', () => {
  const env = useGatewayWithUpstream((url) => fakeUpstreamConfig(url));
  beforeEach(() => env.upstream.reset());

  /** Sends `body`, expects 400 invalid_value naming `param`, and checks that nothing was charged or forwarded. */
  async function refused(body: string, param: string | null, message: RegExp, headers: Record<string, string> = {}): Promise<void> {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', CHAT, { key: account.key, body, headers });
    const error = assertError(res, 400, 'invalid_request_error', 'invalid_value', param);
    assert.match(error.message, message);
    assert.equal(upstream.requests.length, 0, 'no upstream was called');
    const after = await credits(gw, account.key);
    assert.deepEqual({ total: after.total_credits, reserved: after.reserved_credits }, { total: 100_000, reserved: 0 }, 'nothing charged or held');
  }

  it('refuses tool parameters nested 33 and 100 levels deep, naming the tool', async () => {
    for (const depth of [33, 100]) {
      await refused(chatBody({ tools: toolWith(nestedObjects(depth)) }), 'tools[0].function.parameters', /more than 32 levels/);
    }
  });

  it('refuses tool parameters nested 100,000 levels deep by the bound on the whole body', async () => {
    await refused(chatBody({ tools: toolWith(nestedObjects(100_000)) }), 'tools', /more than 128 levels/);
  });

  it('refuses tool parameters with 200,000 keys', async () => {
    const keys = Array.from({ length: 200_000 }, (_, i) => `"k${i}":0`).join(',');
    await refused(chatBody({ tools: toolWith(`{"type":"object","properties":{${keys}}}`) }), 'tools[0].function.parameters', /more than 10000 values/);
  });

  it('refuses a deep value under any other key of a tool entry', async () => {
    await refused(chatBody({ tools: toolWith('{}', `"extension":${nestedObjects(40)},`) }), 'tools[0].extension', /more than 32 levels/);
  });

  it('refuses a nested response_format json_schema', async () => {
    const format = `{"type":"json_schema","json_schema":{"name":"x","schema":${nestedObjects(40)}}}`;
    await refused(chatBody({ response_format: format }), 'response_format.json_schema', /more than 32 levels/);
  });

  it('refuses a nested tool_choice object', async () => {
    const choice = `{"type":"function","function":{"name":"f","x":${nestedObjects(40)}}}`;
    await refused(chatBody({ tools: toolWith('{}'), tool_choice: choice }), 'tool_choice.function', /more than 32 levels/);
  });

  it('refuses 1,000,000 nested arrays inside an unknown field, even under an Idempotency-Key', async () => {
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    await refused(chatBody({ junk: deep }), 'junk', /more than 128 levels/, { 'idempotency-key': 'deep-junk' });
    await refused(chatBody({ junk: deep }), 'junk', /more than 128 levels/);
  });

  it('answers a body of nested arrays just under the size limit with invalid_json, never a 500', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const depth = 4_190_000;
    const res = await call(gw, 'POST', CHAT, { key: account.key, body: `${'['.repeat(depth)}${']'.repeat(depth)}` });
    assertError(res, 400, 'invalid_request_error', 'invalid_json');
    assert.equal(upstream.requests.length, 0);
    assert.equal((await credits(gw, account.key)).total_credits, 100_000);
  });

  it('serves parameters nested exactly 32 levels deep, forwarded as sent, after all the refusals', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const parameters = nestedObjects(32);
    const res = await call(gw, 'POST', CHAT, { key: account.key, body: chatBody({ tools: toolWith(parameters), tool_choice: '"auto"' }) });
    assert.equal(res.status, 200, res.text);
    assert.equal(upstream.requests.length, 1);
    const sent = upstream.requests[0]!.body as { tools: Array<{ function: { parameters: unknown } }> };
    assert.deepEqual(sent.tools[0]!.function.parameters, JSON.parse(parameters));
    assert.ok((await credits(gw, account.key)).total_credits < 100_000, 'a served request is charged');
  });
});
