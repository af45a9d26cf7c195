/**
 * Twenty copies of one request sent at once with the same Idempotency-Key:
 * the upstream is called once, the account is charged once, every other copy
 * is either told the first is still running (409) or gets the same completion.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fakeUpstreamConfig, useGatewayWithUpstream } from '../support/gateway.js';
import { call, credits } from '../support/e2e.js';

describe('Idempotency-Key under concurrency', () => {
  const env = useGatewayWithUpstream((url) => fakeUpstreamConfig(url, { 'svc-fast': ['svc-fast-slow-150'] }));

  for (const stream of [false, true]) {
    it(`charges once for 20 simultaneous copies (${stream ? 'streaming' : 'JSON'})`, async () => {
      const { gw, upstream } = env;
      upstream.reset();
      const account = await gw.createAccount({ purchased: 10_000 });
      const body = { model: 'svc-fast', stream, messages: [{ role: 'user', content: 'count to three' }] };
      const headers = { 'idempotency-key': `same-${stream}` };
      const results = await Promise.all(Array.from({ length: 20 }, () => call(gw, 'POST', '/v1/chat/completions', { key: account.key, body, headers })));

      const statuses = results.map((r) => r.status);
      assert.ok(statuses.every((s) => s === 200 || s === 409), `statuses: ${statuses.join(',')}`);
      for (const conflict of results.filter((r) => r.status === 409)) {
        assert.equal((conflict.json as { error: { code: string } }).error.code, 'idempotency_conflict');
      }
      assert.equal(upstream.requests.length, 1, 'the upstream is called once');

      const after = await credits(gw, account.key);
      const spent = 10_000 - after.total_credits;
      assert.ok(spent > 0);
      assert.equal(after.reserved_credits, 0);

      // A later copy replays the one completion, with the one charge.
      const replay = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body, headers });
      assert.equal(replay.status, 200);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      const ids = new Set(results.filter((r) => r.status === 200).map((r) => completionId(r.text, stream)));
      ids.add(completionId(replay.text, stream));
      assert.equal(ids.size, 1, 'every 200 is the same completion');
      assert.equal((await credits(gw, account.key)).total_credits, after.total_credits, 'the replay charged nothing');
      assert.equal(upstream.requests.length, 1);
    });
  }
});

function completionId(text: string, stream: boolean): string {
  if (!stream) return (JSON.parse(text) as { id: string }).id;
  const first = text.split('\n').find((line) => line.startsWith('data: {'));
  assert.ok(first, 'a streamed answer has a data chunk');
  return (JSON.parse(first.slice('data: '.length)) as { id: string }).id;
}
