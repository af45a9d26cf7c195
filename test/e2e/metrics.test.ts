/**
 * /metrics end to end: each operator metric moves when the thing it counts
 * happens, on a real gateway in front of the scripted fake upstream.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { countPromptTokens } from '../../src/metering/tokens.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { startGateway, TestClock, type TestGateway } from '../support/gateway.js';
import { aliasesConfig, call, svcOf } from '../support/e2e.js';

const messages = [{ role: 'user' as const, content: 'Hello there' }];
const COOLDOWN_MS = 60_000;

/** Prometheus text → the sum of the samples of `name` whose labels include `labels`. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) {
      sum += Number(match[3]);
      found = true;
    }
  }
  return found ? sum : Number.NaN;
}

async function scrape(gw: TestGateway): Promise<string> {
  const res = await call(gw, 'GET', '/metrics');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  return res.text;
}

/** Waits (without a deadline of its own: the test runner's applies) until `check` holds. */
async function eventually(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe('metrics', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  const clock = new TestClock(new Date());

  before(async () => {
    upstream = await startFakeUpstream();
    const config = aliasesConfig(upstream.url, {
      'm-ok': ['plain-ok'],
      'm-failover': ['fo-error-500', 'fo-backup'],
      'm-hedge': ['hedge-slow-400', 'hedge-fast'],
      'm-broken': ['broken-error-500'],
      'm-drip': ['endless-drip'],
      'm-inflated': ['overcount-inflated'],
    }, { first_byte_timeout_ms: 5_000, hedge_after_ms: 100, breaker: { failures: 1, cooldown_ms: COOLDOWN_MS } },
    { input_credits_per_1k: 1000, output_credits_per_1k: 1000 });
    gw = await startGateway({ config: { ...(config as object), limits: { max_in_flight: 1 } }, clock, defaultMetrics: true });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  it('counts completions by alias, status, route and mode, and times the upstream', async () => {
    const { key } = await gw.createAccount({ purchased: 1_000_000 });
    const client = gw.client(key);
    await client.chat.completions.create({ model: 'm-ok', messages });
    for await (const _ of await client.chat.completions.create({ model: 'm-ok', messages, stream: true }));
    const text = await scrape(gw);
    const route = 'fake/plain-ok';
    assert.equal(sample(text, 'svc_completions_total', { alias: 'm-ok', status: '200', route, mode: 'json' }), 1);
    assert.equal(sample(text, 'svc_completions_total', { alias: 'm-ok', status: '200', route, mode: 'stream' }), 1);
    assert.equal(sample(text, 'svc_upstream_latency_seconds_count', { upstream: route, outcome: 'ok' }), 2);
    assert.equal(sample(text, 'svc_upstream_time_to_first_token_seconds_count', { upstream: route }), 2);
    assert.ok(sample(text, 'svc_upstream_latency_seconds_sum', { upstream: route, outcome: 'ok' }) > 0);
  });

  it('counts a failed completion under its status, with no route', async () => {
    const { key } = await gw.createAccount({ purchased: 1_000_000 });
    const res = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'm-broken', messages } });
    assert.equal(res.status, 502);
    const text = await scrape(gw);
    assert.equal(sample(text, 'svc_completions_total', { alias: 'm-broken', status: '502', route: 'none' }), 1);
    assert.equal(sample(text, 'svc_upstream_latency_seconds_count', { upstream: 'fake/broken-error-500', outcome: 'status' }), 1);
  });

  it('counts failovers and hedges by upstream', async () => {
    const { key } = await gw.createAccount({ purchased: 1_000_000 });
    const client = gw.client(key);
    assert.equal(svcOf(await client.chat.completions.create({ model: 'm-failover', messages })).routed_model, 'fo-backup');
    assert.equal(svcOf(await client.chat.completions.create({ model: 'm-hedge', messages })).routed_model, 'hedge-fast');
    const text = await scrape(gw);
    assert.equal(sample(text, 'svc_failovers_total', { upstream: 'fake/fo-error-500' }), 1);
    assert.equal(sample(text, 'svc_hedges_total', { upstream: 'fake/hedge-fast' }), 1);
  });

  it('shows each breaker closed, open, then half-open after the cooldown, and open again when its trial fails', async () => {
    const breaker = 'fake/fo-error-500';
    assert.equal(sample(await scrape(gw), 'svc_breaker_state', { upstream: 'fake/plain-ok' }), 0);
    // One failure opens it (failures: 1); the failover test above already failed it once.
    assert.equal(sample(await scrape(gw), 'svc_breaker_state', { upstream: breaker }), 2);
    clock.advance(COOLDOWN_MS + 1);
    assert.equal(sample(await scrape(gw), 'svc_breaker_state', { upstream: breaker }), 1);
    // On trial it fails again: open once more.
    const { key } = await gw.createAccount({ purchased: 1_000_000 });
    await gw.client(key).chat.completions.create({ model: 'm-failover', messages });
    assert.equal(sample(await scrape(gw), 'svc_breaker_state', { upstream: breaker }), 2);
  });

  it('counts credits reserved, charged and released: what was held is charged or given back', async () => {
    const before = await scrape(gw);
    const { key } = await gw.createAccount({ purchased: 1_000_000 });
    const completion = await gw.client(key).chat.completions.create({ model: 'm-ok', messages, max_tokens: 50 });
    const text = await scrape(gw);
    const delta = (name: string) => sample(text, name, { model: 'm-ok' }) - sample(before, name, { model: 'm-ok' });
    assert.equal(delta('svc_credits_charged_total'), svcOf(completion).credits_used);
    assert.ok(delta('svc_credits_released_total') > 0, 'max_tokens 50 holds more than a short answer costs');
    assert.equal(delta('svc_credits_reserved_total'), delta('svc_credits_charged_total') + delta('svc_credits_released_total'));
  });

  it('counts the shortfall a settlement could not collect', async () => {
    // The upstream overcounts the prompt; the gateway believes up to twice its estimate plus 64, beyond what the account holds.
    const estimate = countPromptTokens(messages, 64_000);
    const { key } = await gw.createAccount({ purchased: estimate + 10 });
    const completion = await gw.client(key).chat.completions.create({ model: 'm-inflated', messages, max_tokens: 1 });
    const text = await scrape(gw);
    const charged = sample(text, 'svc_credits_charged_total', { model: 'm-inflated' });
    assert.equal(charged, svcOf(completion).credits_used);
    assert.equal(charged, estimate + 10, 'everything the account held');
    assert.equal(sample(text, 'svc_credits_shortfall_total', { model: 'm-inflated' }), 2 * estimate + 64 + 1 - (estimate + 10));
  });

  it('shows the holds open while a stream runs, refuses the next request with 503 (max_in_flight 1), and counts it', async () => {
    const { key } = await gw.createAccount({ purchased: 1_000_000 });
    const controller = new AbortController();
    const stream = await gw.client(key).chat.completions.create({ model: 'm-drip', messages, stream: true }, { signal: controller.signal });
    const chunks = stream[Symbol.asyncIterator]();
    await chunks.next();
    assert.equal(sample(await scrape(gw), 'svc_holds_open'), 1);
    const refused = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'm-ok', messages } });
    assert.equal(refused.status, 503);
    controller.abort();
    await chunks.next().catch(() => undefined);
    await eventually(async () => sample(await scrape(gw), 'svc_holds_open') === 0);
    assert.equal(sample(await scrape(gw), 'svc_requests_refused_total', { status: '503', reason: 'overloaded' }), 1);
  });

  it('counts refusals by status and reason: 401, 402 and 429', async () => {
    const unknown = await call(gw, 'POST', '/v1/chat/completions', { key: 'sk-svc-live-nope', body: { model: 'm-ok', messages } });
    assert.equal(unknown.status, 401);
    const poor = await gw.createAccount({ purchased: 1 });
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key: poor.key, body: { model: 'm-ok', messages } })).status, 402);
    const capped = await gw.createAccount({ purchased: 1_000_000, key: { dailyCreditLimit: 1 } });
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key: capped.key, body: { model: 'm-ok', messages } })).status, 429);
    const text = await scrape(gw);
    assert.equal(sample(text, 'svc_requests_refused_total', { status: '401', reason: 'invalid_api_key' }), 1);
    assert.equal(sample(text, 'svc_requests_refused_total', { status: '402', reason: 'insufficient_credits' }), 1);
    assert.equal(sample(text, 'svc_requests_refused_total', { status: '429', reason: 'daily_credit_limit_exceeded' }), 1);
    assert.ok(Number.isNaN(sample(text, 'svc_requests_refused_total', { status: '502' })), 'only the four statuses');
  });

  it('exposes the process metrics', async () => {
    const text = await scrape(gw);
    assert.ok(sample(text, 'process_cpu_user_seconds_total') >= 0);
    assert.ok(sample(text, 'nodejs_heap_size_used_bytes') > 0);
  });
});
