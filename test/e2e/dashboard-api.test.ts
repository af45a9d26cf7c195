/**
 * What the dashboard is served from and reads, over HTTP: the page and its
 * assets (one origin, strict CSP, versioned caching), the upstreams' recent
 * error rate and latency, and requests per minute by alias. A pinned clock
 * moves the windows.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { fakeUpstreamConfig, startGateway, TestClock, type TestGateway } from '../support/gateway.js';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { assertError, call, svcOf } from '../support/e2e.js';

const T0 = '2026-11-21T12:00:30Z';
const ADMIN = 'admin-token-dashboard-0123';
const MINUTE = 60_000;

interface UpstreamRow {
  upstream: string;
  state: string;
  recent_attempts: number;
  recent_failures: number;
  recent_error_rate: number | null;
  latency_p50_ms: number | null;
  latency_p95_ms: number | null;
}
interface Traffic {
  object: string;
  start: string;
  minutes: number;
  by_alias: Record<string, number[]>;
}

describe('the dashboard and the operator data behind it', () => {
  const clock = new TestClock(T0);
  let gw: TestGateway;
  let upstream: FakeUpstream;
  before(async () => {
    upstream = await startFakeUpstream();
    const config = fakeUpstreamConfig(upstream.url, { 'svc-fast': ['fast-error-500', 'fast-slow-60'] });
    gw = await startGateway({ clock, config, adminToken: ADMIN });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  const admin = async <T>(path: string): Promise<T> => {
    const res = await call(gw, 'GET', path, { key: ADMIN });
    assert.equal(res.status, 200, res.text);
    return res.json as T;
  };
  const upstreams = async () => new Map((await admin<{ data: UpstreamRow[] }>('/admin/v1/upstreams')).data.map((u) => [u.upstream, u]));
  const complete = async (key: string, model: string) =>
    svcOf(await gw.client(key).chat.completions.create({ model, messages: [{ role: 'user', content: 'Hi' }] }));

  it('serves the page and its assets from the gateway itself, under a strict CSP', async () => {
    const page = await call(gw, 'GET', '/dashboard');
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/);
    assert.equal(page.headers.get('cache-control'), 'no-cache');
    const refs = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.equal(refs.length, 3, page.text);
    for (const ref of refs) assert.match(ref, /^\/dashboard\/[\w.-]+\?v=[0-9a-f]{12}$/, 'every asset from this origin, versioned');
    for (const ref of refs) {
      const asset = await call(gw, 'GET', ref);
      assert.equal(asset.status, 200, ref);
      assert.equal(asset.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.match(asset.headers.get('content-security-policy') ?? '', /default-src 'self'/);
      // The only absolute URL in any asset is the SVG namespace, which is a name, not a request.
      const urls = [...asset.text.matchAll(/https?:\/\/[^\s'"`)]+/g)].map((m) => m[0]);
      assert.deepEqual(urls.filter((u) => u !== 'http://www.w3.org/2000/svg'), [], ref);
    }
    const unversioned = await call(gw, 'GET', '/dashboard/app.js');
    assert.equal(unversioned.status, 200);
    assert.equal(unversioned.headers.get('cache-control'), 'no-cache');
    const slash = await fetch(`${gw.origin}/dashboard/`, { redirect: 'manual' });
    assert.deepEqual([slash.status, slash.headers.get('location')], [308, '/dashboard']);
    assertError(await call(gw, 'GET', '/dashboard/secrets.json'), 404, 'invalid_request_error', 'not_found');
    assertError(await call(gw, 'GET', '/dashboard/..%2Fpackage.json'), 404, 'invalid_request_error', 'not_found');
    assertError(await call(gw, 'POST', '/dashboard', { body: {} }), 405, 'invalid_request_error', 'method_not_allowed');
  });

  it('refuses the operator data without the admin token', async () => {
    assertError(await call(gw, 'GET', '/admin/v1/traffic'), 401, 'authentication_error', 'invalid_api_key');
    assertError(await call(gw, 'GET', '/admin/v1/traffic', { key: 'wrong' }), 401, 'authentication_error', 'invalid_api_key');
  });

  it('shows each upstream\'s recent attempts, error rate and latency, and forgets attempts older than 5 minutes', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    let view = await upstreams();
    assert.deepEqual(
      [view.get('fake/fast-error-500')!.recent_attempts, view.get('fake/fast-error-500')!.recent_error_rate, view.get('fake/fast-error-500')!.latency_p50_ms],
      [0, null, null],
    );
    for (let n = 0; n < 3; n++) assert.equal((await complete(key, 'svc-fast')).routed_model, 'fast-slow-60');
    await complete(key, 'svc-code');
    view = await upstreams();
    const failing = view.get('fake/fast-error-500')!;
    assert.deepEqual([failing.state, failing.recent_attempts, failing.recent_failures, failing.recent_error_rate], ['closed', 3, 3, 1]);
    assert.equal(typeof failing.latency_p50_ms, 'number');
    const slow = view.get('fake/fast-slow-60')!;
    assert.deepEqual([slow.recent_attempts, slow.recent_failures, slow.recent_error_rate], [3, 0, 0]);
    // The fake waits 60 ms before its first byte: the latency cannot be less (a lower bound, not a timing race).
    assert.ok(slow.latency_p50_ms! >= 55 && slow.latency_p95_ms! >= slow.latency_p50_ms!, JSON.stringify(slow));
    assert.deepEqual([view.get('fake/svc-code-ok')!.recent_attempts, view.get('fake/svc-code-ok')!.recent_error_rate], [1, 0]);
    assert.equal(view.get('fake/svc-smart-ok')!.recent_attempts, 0);

    clock.advance(5 * MINUTE + 1_000);
    view = await upstreams();
    assert.deepEqual([view.get('fake/fast-slow-60')!.recent_attempts, view.get('fake/fast-slow-60')!.recent_error_rate], [0, null]);
    clock.set(T0);
  });

  it('counts requests per minute by alias over the last 60 minutes, per minute bucket', async () => {
    clock.set(T0);
    const { key } = await gw.createAccount({ purchased: 100_000 });
    // The test above made 3 svc-fast and 1 svc-code requests in this minute.
    let traffic = await admin<Traffic>('/admin/v1/traffic');
    assert.deepEqual([traffic.object, traffic.minutes, traffic.start], ['traffic', 60, '2026-11-21T11:01:00Z']);
    assert.deepEqual(Object.keys(traffic.by_alias), ['svc-code', 'svc-fast']);
    assert.equal(traffic.by_alias['svc-fast']!.length, 60);
    assert.equal(traffic.by_alias['svc-fast']![59], 3);
    assert.equal(traffic.by_alias['svc-code']![59], 1);

    clock.advance(2 * MINUTE);
    await complete(key, 'svc-code');
    await complete(key, 'svc-code');
    // A request refused before routing (unknown alias) is not an alias's traffic.
    assert.equal((await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'svc-none', messages: [{ role: 'user', content: 'Hi' }] } })).status, 404);
    traffic = await admin<Traffic>('/admin/v1/traffic');
    assert.equal(traffic.start, '2026-11-21T11:03:00Z');
    assert.deepEqual([traffic.by_alias['svc-fast']![57], traffic.by_alias['svc-code']![57], traffic.by_alias['svc-code']![59]], [3, 1, 2]);
    assert.deepEqual(Object.keys(traffic.by_alias), ['svc-code', 'svc-fast']);
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    assert.deepEqual([sum(traffic.by_alias['svc-fast']!), sum(traffic.by_alias['svc-code']!)], [3, 3]);

    // An hour later the minute of T0 is out of the window, and its slot in the ring starts again from zero.
    clock.set(new Date(Date.parse(T0) + 60 * MINUTE));
    await complete(key, 'svc-fast');
    traffic = await admin<Traffic>('/admin/v1/traffic');
    assert.deepEqual([sum(traffic.by_alias['svc-fast']!), traffic.by_alias['svc-fast']![59]], [1, 1]);
    assert.deepEqual([sum(traffic.by_alias['svc-code']!), traffic.by_alias['svc-code']![1]], [2, 2]);
    clock.set(T0);
  });
});
