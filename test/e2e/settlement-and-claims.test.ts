/**
 * What happens around the database when it is slow or refuses: a settlement
 * that fails is retried, and if it keeps failing a sweeper charges what was
 * delivered (never releases it); a client that leaves while its request waits
 * on the database is never served or charged; and the in-flight limit is counted
 * before the first wait.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { creditsFor } from '../../src/metering/pricing.js';
import type { SettleRequest, Store } from '../../src/store/types.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { fakeUpstreamConfig, holdDatabase, startGateway, type TestGateway } from '../support/gateway.js';
import { call, credits, parseSse, queryDb } from '../support/e2e.js';
import { ledgerVerifyCli, waitFor } from '../support/e2e-helpers.js';

const FAST = { input_credits_per_1k: 4, output_credits_per_1k: 12 };
const MESSAGES = [{ role: 'user', content: 'tell me something' }];

/** The store, with `settle` refused by "the database" while `failing()` says so. */
function refusingSettle(failing: () => boolean): (store: Store) => Store {
  return (store) => new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === 'settle') {
        return async (request: SettleRequest) => {
          if (failing()) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
          return target.settle(request);
        };
      }
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

interface Chunk { choices?: Array<{ delta: { content?: string }; finish_reason: string | null }>; svc?: { credits_used: number }; error?: { code: string } }

function chunksOf(text: string): Chunk[] {
  return parseSse(text).data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Chunk);
}

describe('a settlement the database refuses', { timeout: 30_000 }, () => {
  let upstream: FakeUpstream;
  before(async () => {
    upstream = await startFakeUpstream({ reply: 'one two three four five six seven eight nine ten' });
  });
  after(async () => {
    await upstream.close();
  });

  it('is tried again while the lease keeps the hold, and the stream ends settled', async () => {
    let refusals = 2;
    const gw = await startGateway({ config: fakeUpstreamConfig(upstream.url), wrapStore: refusingSettle(() => refusals-- > 0) });
    try {
      const account = await gw.createAccount({ purchased: 10_000 });
      const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'svc-fast', stream: true, messages: MESSAGES } });
      const chunks = chunksOf(res.text);
      const finish = chunks.find((c) => c.choices?.[0]?.finish_reason === 'stop');
      assert.ok(finish?.svc, res.text);
      assert.ok(!chunks.some((c) => c.error), 'no error chunk');
      assert.ok(finish.svc.credits_used > 0);
      const after = await credits(gw, account.key);
      assert.deepEqual([after.total_credits, after.reserved_credits], [10_000 - finish.svc.credits_used, 0]);
    } finally {
      await gw.close();
    }
  });

  it('when it never succeeds, leaves the delivered content for a sweeper to charge instead of releasing it', async () => {
    const gw = await startGateway({
      config: fakeUpstreamConfig(upstream.url), wrapStore: refusingSettle(() => true), leaseMs: 300, sweepEveryMs: 100,
    });
    try {
      const account = await gw.createAccount({ purchased: 10_000 });
      const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'svc-fast', stream: true, messages: MESSAGES } });
      const chunks = chunksOf(res.text);
      const content = chunks.map((c) => c.choices?.[0]?.delta.content ?? '').join('');
      assert.equal(content, 'one two three four five six seven eight nine ten', 'the client got the whole answer');
      assert.equal(chunks.at(-1)?.error?.code, 'internal_error', 'then an error chunk: the gateway could not settle');
      const [reservation] = await waitFor(
        async () => await queryDb<{ state: string; charged: number }>(gw, 'SELECT state, charged FROM reservations'),
        (rows) => rows[0]?.state !== 'held', 'the sweeper to close the reservation',
      );
      // Charged for the prompt and what was delivered, as a client that cut the stream would be.
      const delivered = creditsFor(countPromptTokens([{ role: 'user', content: MESSAGES[0]!.content }]), countTextTokens(content), FAST);
      assert.deepEqual(reservation, { state: 'settled', charged: delivered });
      const after = await credits(gw, account.key);
      assert.deepEqual([after.total_credits, after.reserved_credits], [10_000 - delivered, 0]);
      assert.equal((await ledgerVerifyCli(gw.databaseUrl)).code, 0);
    } finally {
      await gw.close();
    }
  });
});

describe('while the database is busy', { timeout: 30_000 }, () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  before(async () => {
    upstream = await startFakeUpstream();
    const config = fakeUpstreamConfig(upstream.url) as Record<string, unknown>;
    gw = await startGateway({ config: { ...config, limits: { max_in_flight: 1 } } });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  /** A key already used once, so that authentication writes nothing for a minute. */
  async function warmAccount() {
    const account = await gw.createAccount({ purchased: 10_000 });
    const first = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'svc-fast', messages: MESSAGES } });
    assert.equal(first.status, 200, first.text);
    upstream.reset();
    return { ...account, balance: (await credits(gw, account.key)).total_credits };
  }

  it('a client that leaves while its Idempotency-Key claim waits is neither served nor charged', async () => {
    const account = await warmAccount();
    const lock = await holdDatabase(gw);
    const leaving = new AbortController();
    const sent = fetch(`${gw.baseURL}/chat/completions`, {
      method: 'POST', signal: leaving.signal,
      headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json', 'idempotency-key': 'left-early' },
      body: JSON.stringify({ model: 'svc-fast', messages: MESSAGES }),
    }).catch(() => null);
    await sleep(300);
    leaving.abort();
    await sent;
    await sleep(100);
    await lock.release();
    // The claim is taken once the lock is free, then let go: the client is gone.
    await waitFor(async () => await queryDb(gw, "SELECT 1 FROM idempotency_keys WHERE key = 'left-early' AND state = 'running'"),
      (rows) => rows.length === 0, 'the claim to be settled or let go');
    await sleep(200);
    assert.equal(upstream.requests.length, 0, 'no upstream call for a client that left');
    assert.equal((await credits(gw, account.key)).total_credits, account.balance);
  });

  it('counts a request against limits.max_in_flight before its first wait on the database', async () => {
    const account = await warmAccount();
    const lock = await holdDatabase(gw);
    const send = (key: string) => call(gw, 'POST', '/v1/chat/completions', {
      key: account.key, headers: { 'idempotency-key': key }, body: { model: 'svc-fast', messages: MESSAGES },
    });
    const both = Promise.all([send('first'), send('second')]);
    await sleep(300);
    await lock.release();
    const statuses = (await both).map((r) => r.status).sort();
    assert.deepEqual(statuses, [200, 503]);
    assert.equal(upstream.requests.length, 1);
  });
});
