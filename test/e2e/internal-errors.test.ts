/** The last error rows: bad message shapes are 400, and an internal failure is a plain 500 with no stack. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assertError, call } from '../support/e2e.js';
import { startGateway } from '../support/gateway.js';

describe('message shapes the contract refuses', () => {
  it('refuses null content outside an assistant turn with tool_calls, and a tool message without tool_call_id', async () => {
    const gw = await startGateway();
    try {
      const { key } = await gw.createAccount({ purchased: 10_000 });
      const send = (messages: unknown[]) => call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'svc-fast', messages } });
      assertError(await send([{ role: 'user', content: null }]), 400, 'invalid_request_error', 'invalid_value', 'messages[0].content');
      assertError(await send([{ role: 'user', content: 'hi' }, { role: 'assistant', content: null }]), 400, 'invalid_request_error', 'invalid_value', 'messages[1].content');
      assertError(await send([{ role: 'user', content: 'hi' }, { role: 'tool', content: '42' }]), 400, 'invalid_request_error', 'invalid_value', 'messages[1].tool_call_id');
      assert.equal((await send([{ role: 'system', content: [{ type: 'text', text: 'Be brief.' }] }, { role: 'user', content: 'hi' }])).status, 200);
    } finally {
      await gw.close();
    }
  });
});

describe('500 internal_error', () => {
  it('answers a failure inside the gateway with the OpenAI body, a request id and no stack; readyz says so', async () => {
    const gw = await startGateway();
    try {
      const { key } = await gw.createAccount({ purchased: 10_000 });
      await gw.store.close(); // the database goes away under the running app
      const res = await call(gw, 'GET', '/v1/credits', { key });
      const error = assertError(res, 500, 'server_error', 'internal_error');
      // The message names the request id, which finds the details in the log.
      assert.equal(error.message, `The gateway hit an internal error. (request id: ${res.headers.get('x-request-id')})`);
      assert.doesNotMatch(res.text, /at .*\.(ts|js):\d+/, 'no stack trace');
      assert.equal((await call(gw, 'GET', '/readyz')).status, 503);
      assert.equal((await call(gw, 'GET', '/healthz')).status, 200);
    } finally {
      await gw.close();
    }
  });
});
