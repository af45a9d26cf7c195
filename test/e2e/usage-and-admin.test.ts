/**
 * GET /v1/usage, the admin API and the unauthenticated probes, end to end on
 * the built-in simulator config with a pinned clock.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startGateway, TestClock, type TestGateway } from '../support/gateway.js';
import { assertError, call, credits, svcOf, usage, type CreditsBody } from '../support/e2e.js';

const T0 = '2026-11-21T12:00:00Z';
const ADMIN = 'admin-token-0123456789';

describe('GET /v1/usage', () => {
  const clock = new TestClock(T0);
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ clock });
  });
  after(() => gw.close());

  const complete = async (key: string, model: string) => {
    const completion = await gw.client(key).chat.completions.create({ model, messages: [{ role: 'user', content: `Hello ${model}` }] });
    return { usage: completion.usage!, svc: svcOf(completion) };
  };

  it('defaults to the 30 days ending today and is empty for a new account', async () => {
    const { key } = await gw.createAccount({ purchased: 10 });
    assert.deepEqual(await usage(gw, key), {
      object: 'usage', period_start: '2026-10-23T00:00:00Z', period_end: '2026-11-21T23:59:59Z',
      total_requests: 0, total_prompt_tokens: 0, total_completion_tokens: 0, total_credits_spent: 0, breakdown_by_model: {}, daily: [],
    });
  });

  it('counts every key of the account, revoked ones too, by day and model; the total equals the drop in balance', async () => {
    const { key } = await gw.createAccount({ purchased: 100_000 });
    const other = await gw.createAccount({ purchased: 100_000 });
    const second = (await call(gw, 'POST', '/v1/api-keys', { key, body: { name: 'second' } })).json as { id: string; key: string };

    clock.set('2026-11-20T23:59:59Z');
    const yesterday = await complete(key, 'svc-fast');
    clock.set(T0);
    const results = [await complete(key, 'svc-fast'), await complete(second.key, 'svc-code'), await complete(second.key, 'svc-code')];
    await complete(other.key, 'svc-code');
    assert.equal((await call(gw, 'DELETE', `/v1/api-keys/${second.id}`, { key })).status, 200);

    const all = [yesterday, ...results];
    const sum = (items: typeof all, f: (x: (typeof all)[number]) => number) => items.reduce((s, x) => s + f(x), 0);
    const body = await usage(gw, key);
    assert.deepEqual(
      [body.total_requests, body.total_prompt_tokens, body.total_completion_tokens, body.total_credits_spent],
      [4, sum(all, (x) => x.usage.prompt_tokens), sum(all, (x) => x.usage.completion_tokens), sum(all, (x) => x.svc.credits_used)],
    );
    assert.equal(body.total_credits_spent, 100_000 - (await credits(gw, key)).total_credits);
    const fast = [yesterday, results[0]!];
    const code = results.slice(1);
    assert.deepEqual(body.breakdown_by_model, {
      'svc-fast': { requests: 2, credits: sum(fast, (x) => x.svc.credits_used) },
      'svc-code': { requests: 2, credits: sum(code, (x) => x.svc.credits_used) },
    });
    assert.deepEqual(body.daily.map((d) => [d.date, d.model, d.requests]), [
      ['2026-11-20', 'svc-fast', 1], ['2026-11-21', 'svc-code', 2], ['2026-11-21', 'svc-fast', 1],
    ]);

    const onlyToday = await usage(gw, key, '?start_date=2026-11-21&end_date=2026-11-21');
    assert.deepEqual([onlyToday.period_start, onlyToday.period_end, onlyToday.total_requests], ['2026-11-21T00:00:00Z', '2026-11-21T23:59:59Z', 3]);
    const onlyCode = await usage(gw, key, '?model=svc-code');
    assert.deepEqual([onlyCode.total_requests, onlyCode.total_credits_spent], [2, sum(code, (x) => x.svc.credits_used)]);
    assert.deepEqual(Object.keys(onlyCode.breakdown_by_model), ['svc-code']);
    const none = await usage(gw, key, '?model=svc-nothing');
    assert.deepEqual([none.total_requests, none.total_credits_spent, none.breakdown_by_model], [0, 0, {}]);
    assert.equal((await usage(gw, other.key)).total_requests, 1);
  });

  it('accepts a span of 366 days and refuses malformed dates, start after end, and longer spans', async () => {
    const { key } = await gw.createAccount();
    const ok = await usage(gw, key, '?start_date=2025-11-21&end_date=2026-11-21');
    assert.equal(ok.period_start, '2025-11-21T00:00:00Z');
    const cases: Array<[string, string]> = [
      ['?start_date=2026-13-01', 'start_date'], ['?end_date=2026-02-30', 'end_date'], ['?start_date=yesterday', 'start_date'],
      ['?end_date=2026-1-5', 'end_date'], ['?start_date=2026-11-22&end_date=2026-11-21', 'start_date'],
      ['?start_date=2025-11-20&end_date=2026-11-21', 'start_date'],
    ];
    for (const [query, param] of cases) {
      assertError(await call(gw, 'GET', `/v1/usage${query}`, { key }), 400, 'invalid_request_error', 'invalid_value', param);
    }
  });
});

describe('admin API', () => {
  const clock = new TestClock(T0);
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ clock, adminToken: ADMIN });
  });
  after(() => gw.close());

  const admin = (method: string, path: string, body?: unknown) => call(gw, method, `/admin/v1${path}`, { key: ADMIN, body });
  const newAccount = async () => {
    const res = await admin('POST', '/accounts', { name: 'Acme' });
    assert.equal(res.status, 201, res.text);
    return res.json as { id: string; name: string | null; created_at: string };
  };

  it('refuses a missing or wrong token, and an API key, with 401', async () => {
    const { key } = await gw.createAccount();
    for (const token of [undefined, 'wrong', `${ADMIN}x`, key]) {
      assertError(await call(gw, 'POST', '/admin/v1/accounts', { key: token, body: {} }), 401, 'authentication_error', 'invalid_api_key');
      assertError(await call(gw, 'GET', '/admin/v1/upstreams', { key: token }), 401, 'authentication_error', 'invalid_api_key');
    }
  });

  it('creates an account: 201 {id, name, created_at}', async () => {
    const res = await admin('POST', '/accounts', { name: 'Acme' });
    assert.equal(res.status, 201);
    const body = res.json as Record<string, unknown>;
    assert.match(String(body.id), /^acct_[0-9A-Za-z]+$/);
    assert.deepEqual([body.name, body.created_at], ['Acme', T0]);
    const unnamed = await admin('POST', '/accounts');
    assert.equal(unnamed.status, 201);
    assert.equal((unnamed.json as { name: unknown }).name, null);
  });

  it('lists accounts in id order with their credits, a page at a time, and refuses a bad limit', async () => {
    const made = [await newAccount(), await newAccount(), await newAccount()];
    await admin('POST', `/accounts/${made[1]!.id}/grants`, { kind: 'purchased', amount: 70 });
    const seen: Array<{ id: string; credits: { purchased_credits: { balance: number } } }> = [];
    let after = '';
    for (let page = 0; page < 50; page++) {
      const res = await admin('GET', `/accounts?limit=2${after ? `&after=${after}` : ''}`);
      assert.equal(res.status, 200, res.text);
      const body = res.json as { object: string; data: typeof seen; has_more: boolean };
      assert.equal(body.object, 'list');
      assert.ok(body.data.length <= 2);
      seen.push(...body.data);
      if (!body.has_more) break;
      after = body.data.at(-1)!.id;
    }
    const ids = seen.map((a) => a.id);
    assert.deepEqual(ids, [...ids].sort());
    for (const a of made) assert.ok(ids.includes(a.id), `${a.id} listed`);
    assert.equal(seen.find((a) => a.id === made[1]!.id)!.credits.purchased_credits.balance, 70);
    for (const bad of ['0', '101', 'x', '1.5']) {
      assertError(await admin('GET', `/accounts?limit=${bad}`), 400, 'invalid_request_error', 'invalid_value', 'limit');
    }
  });

  it('grants earned (with expiry) and purchased (without) credits', async () => {
    const account = await newAccount();
    const earned = await admin('POST', `/accounts/${account.id}/grants`, { kind: 'earned', amount: 100, expires_at: '2026-12-01T00:00:00Z' });
    assert.equal(earned.status, 201, earned.text);
    const grant = earned.json as Record<string, unknown>;
    assert.match(String(grant.id), /^grant_/);
    assert.deepEqual([grant.account_id, grant.kind, grant.amount, grant.expires_at], [account.id, 'earned', 100, '2026-12-01T00:00:00Z']);
    const purchased = await admin('POST', `/accounts/${account.id}/grants`, { kind: 'purchased', amount: 250 });
    assert.equal(purchased.status, 201, purchased.text);
    assert.equal((purchased.json as { expires_at: unknown }).expires_at, null);
    const past = await admin('POST', `/accounts/${account.id}/grants`, { kind: 'earned', amount: 40, expires_at: '2026-11-01T00:00:00Z' });
    assert.equal(past.status, 201, past.text);

    const shown = await admin('GET', `/accounts/${account.id}`);
    assert.equal(shown.status, 200);
    const body = shown.json as { id: string; name: string; created_at: string; credits: CreditsBody };
    assert.deepEqual([body.id, body.name, body.created_at], [account.id, 'Acme', T0]);
    assert.deepEqual(body.credits, {
      account_id: account.id, total_credits: 350,
      earned_credits: { balance: 100, expires_at: '2026-12-01T00:00:00Z', days_remaining: 10 },
      purchased_credits: { balance: 250, expires_at: null }, currency: 'SVC_CREDITS', reserved_credits: 0, available_credits: 350,
    });
  });

  it('refuses a bad grant with 400, and an unknown account with 404', async () => {
    const account = await newAccount();
    const cases: Array<[unknown, string]> = [
      [{ kind: 'earned', amount: 10 }, 'expires_at'],
      [{ kind: 'purchased', amount: 10, expires_at: '2027-01-01T00:00:00Z' }, 'expires_at'],
      [{ kind: 'purchased', amount: -5 }, 'amount'], [{ kind: 'purchased', amount: 0 }, 'amount'],
      [{ kind: 'purchased', amount: 1.5 }, 'amount'], [{ kind: 'purchased', amount: '10' }, 'amount'],
      [{ kind: 'free', amount: 10 }, 'kind'], [{ kind: 'earned', amount: 10, expires_at: 'tomorrow' }, 'expires_at'],
    ];
    for (const [body, param] of cases) {
      assertError(await admin('POST', `/accounts/${account.id}/grants`, body), 400, 'invalid_request_error', 'invalid_value', param);
    }
    for (const body of ['[]', 'nope', undefined]) {
      assertError(await admin('POST', `/accounts/${account.id}/grants`, body), 400, 'invalid_request_error', 'invalid_json');
    }
    const shown = (await admin('GET', `/accounts/${account.id}`)).json as { credits: CreditsBody };
    assert.equal(shown.credits.total_credits, 0);

    const ghost = 'acct_00000000000000000000';
    assertError(await admin('POST', `/accounts/${ghost}/grants`, { kind: 'purchased', amount: 10 }), 404, 'invalid_request_error', 'account_not_found', 'id');
    assertError(await admin('GET', `/accounts/${ghost}`), 404, 'invalid_request_error', 'account_not_found', 'id');
    assertError(await admin('POST', `/accounts/${ghost}/api-keys`, {}), 404, 'invalid_request_error', 'account_not_found', 'id');
  });

  it("creates a working key for an account: 201 with the secret", async () => {
    const account = await newAccount();
    await admin('POST', `/accounts/${account.id}/grants`, { kind: 'purchased', amount: 1000 });
    const res = await admin('POST', `/accounts/${account.id}/api-keys`, { name: 'ops', environment: 'test', daily_credit_limit: 50 });
    assert.equal(res.status, 201, res.text);
    const created = res.json as { id: string; key: string; name: string; environment: string; daily_credit_limit: number; object: string };
    assert.match(created.key, /^svc_test_/);
    assert.deepEqual([created.object, created.name, created.environment, created.daily_credit_limit], ['api_key', 'ops', 'test', 50]);
    const own = await credits(gw, created.key);
    assert.deepEqual([own.account_id, own.total_credits], [account.id, 1000]);
    const completion = await gw.client(created.key).chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(svcOf(completion).balance_remaining, 1000 - svcOf(completion).credits_used);
    assertError(await admin('POST', `/accounts/${account.id}/api-keys`, { environment: 'staging' }), 400, 'invalid_request_error', 'invalid_value', 'environment');
  });

  it('answers 404 on every /admin path when no admin token is configured', async () => {
    const plain = await startGateway();
    try {
      for (const [method, path] of [['POST', '/admin/v1/accounts'], ['GET', '/admin/v1/upstreams'], ['GET', '/admin/v1/accounts/acct_x']]) {
        for (const key of [undefined, ADMIN]) {
          assertError(await call(plain, method!, path!, { key, body: method === 'POST' ? {} : undefined }), 404, 'invalid_request_error', 'not_found');
        }
      }
    } finally {
      await plain.close();
    }
  });
});

describe('probes', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway();
  });
  after(() => gw.close());

  it('answers /healthz and /readyz without a key', async () => {
    const health = await call(gw, 'GET', '/healthz');
    assert.deepEqual([health.status, health.json], [200, { status: 'ok' }]);
    assert.match(health.headers.get('x-request-id') ?? '', /^req_/);
    const ready = await call(gw, 'GET', '/readyz');
    assert.deepEqual([ready.status, ready.json], [200, { status: 'ready', database: gw.backend }]);
  });

  it('serves Prometheus text with the svc_ metrics', async () => {
    const { key } = await gw.createAccount({ purchased: 1000 });
    const completion = await gw.client(key).chat.completions.create({ model: 'svc-fast', messages: [{ role: 'user', content: 'Hi' }] });
    const res = await call(gw, 'GET', '/metrics');
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
    assert.match(res.text, /^# TYPE svc_http_request_duration_seconds histogram$/m);
    assert.match(res.text, new RegExp(`^svc_credits_charged_total\\{model="svc-fast"\\} ${svcOf(completion).credits_used}$`, 'm'));
    assert.match(res.text, /^svc_upstream_attempts_total\{upstream="simulator\/sim-fast-1",outcome="ok"\} 1$/m);
    assert.match(res.text, /^svc_http_request_duration_seconds_count\{method="POST",route="\/v1\/chat\/completions",status="200"\} 1$/m);
  });
});
