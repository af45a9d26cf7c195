/** 503 when too much work is in flight; hedging through the whole gateway. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fakeUpstreamConfig, useGatewayWithUpstream } from '../support/gateway.js';
import { assertError, call, credits } from '../support/e2e.js';

describe('overload and hedging', () => {
  const env = useGatewayWithUpstream((url) => ({
    ...(fakeUpstreamConfig(url, {
      'svc-smart': ['svc-smart-slow-800'],
      'svc-code': ['svc-code-slow-1500', 'svc-code-ok'],
    }, { hedge_after_ms: 100, first_byte_timeout_ms: 5000 }) as object),
    limits: { max_in_flight: 2 },
  }));

  it('answers 503 overloaded with Retry-After past max_in_flight, and takes nothing for it', async () => {
    const { gw, upstream } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const body = { model: 'svc-smart', messages: [{ role: 'user', content: 'slowly' }] };
    const busy = [call(gw, 'POST', '/v1/chat/completions', { key: account.key, body }), call(gw, 'POST', '/v1/chat/completions', { key: account.key, body })];
    // Wait until both are at the upstream, so both count as in flight.
    for (let i = 0; i < 200 && upstream.requests.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    const before = await credits(gw, account.key);
    const refused = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body });
    assertError(refused, 503, 'overloaded_error', 'overloaded');
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal((await credits(gw, account.key)).reserved_credits, before.reserved_credits, 'the refused request holds nothing');
    for (const res of await Promise.all(busy)) assert.equal(res.status, 200);
    const again = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body });
    assert.equal(again.status, 200, 'room again once they finished');
  });

  it('hedges a silent first route with the second, which serves', async () => {
    const { gw, upstream } = env;
    upstream.reset();
    const account = await gw.createAccount({ purchased: 100_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key: account.key, body: { model: 'svc-code', messages: [{ role: 'user', content: 'fix my bug' }] },
    });
    assert.equal(res.status, 200, res.text);
    assert.equal((res.json as { svc: { routed_model: string } }).svc.routed_model, 'svc-code-ok');
    assert.deepEqual(upstream.requests.map((r) => r.model), ['svc-code-slow-1500', 'svc-code-ok'], 'both ran, the second alongside');
  });
});
