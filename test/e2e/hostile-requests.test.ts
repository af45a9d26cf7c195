/**
 * Hostile input at scale (issue 11, item 4): fast-check properties over the
 * HTTP layer of a real running gateway, ~10,000 generated requests per run
 * (FC_RUNS) with a fixed seed (FC_SEED). Bodies, headers, paths and methods on
 * every public route, raw bytes that are not HTTP, bodies near and over the size
 * limit, slow and truncated uploads. Every answer is a 4xx with the contract's
 * error body (or a well-formed 2xx where the input happens to be valid), never
 * a 5xx or a dropped connection; the gateway stays up; and not one credit, hold
 * or ledger row of the funded account moves.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it, type TestContext } from 'node:test';
import fc from 'fast-check';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { fakeUpstreamConfig, startGateway, type TestAccount, type TestGateway } from '../support/gateway.js';
import { credits, type CreditsBody } from '../support/e2e.js';
import { ledgerVerifyCli } from '../support/e2e-helpers.js';
import { contentTypes, hostileChatBody, pathSegment, queryJunk, unaffordableChatBody } from '../support/hostile-input.js';
import { assertErrorBody, assertHostileAnswer, FC_SEED, fcOptions, runs } from '../support/hostile-checks.js';
import { encodeRequest, RawConnection, type RawRequest } from '../support/raw-http.js';

const ADMIN = 'admin-token-for-hostile-tests';
const CHAT = '/v1/chat/completions';
const BODY_LIMIT = 8 * 1024 * 1024;

interface Snapshot { credits: CreditsBody; poor: CreditsBody; ledgerRows: number; accountRows: number; reservations: number; keys: number }

describe(`hostile requests (fast-check seed ${FC_SEED})`, () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  let account: TestAccount;
  /** Holds 1 credit: valid requests from it are refused with 402, after their Idempotency-Key claim. */
  let poor: TestAccount;
  /** Status and error code of every answer, per property, reported as a diagnostic. */
  let tally = new Map<string, number>();
  let port: number;
  let conn: RawConnection;
  let before0: Snapshot;

  const snapshot = async (): Promise<Snapshot> => {
    const count = async (sql: string, ...params: unknown[]) => Number((await gw.rows<{ n: number | string }>(sql, ...params))[0]!.n);
    return {
      credits: await credits(gw, account.key),
      poor: await credits(gw, poor.key),
      ledgerRows: await count('SELECT COUNT(*) AS n FROM ledger'),
      accountRows: await count('SELECT COUNT(*) AS n FROM ledger WHERE account_id = ?', account.accountId),
      reservations: await count('SELECT COUNT(*) AS n FROM reservations'),
      keys: await count('SELECT COUNT(*) AS n FROM api_keys WHERE account_id = ? AND revoked_at IS NULL', account.accountId),
    };
  };

  before(async () => {
    upstream = await startFakeUpstream();
    const config = { ...(fakeUpstreamConfig(upstream.url) as object), server: { request_timeout_ms: 1500, headers_timeout_ms: 1000 } };
    gw = await startGateway({ config, adminToken: ADMIN });
    account = await gw.createAccount({ purchased: 1_000_000, earned: [{ amount: 5_000, expiresAt: '2099-01-01T00:00:00Z' }] });
    poor = await gw.createAccount({ purchased: 1 });
    port = Number(new URL(gw.origin).port);
    conn = new RawConnection(port);
    before0 = await snapshot();
  });
  after(async () => {
    conn.close();
    await gw.close();
    await upstream.close();
  });

  /** Authorization headers: the funded key (most often, so the body is read), and every way to get it wrong. */
  const authHeaders = (): fc.Arbitrary<Array<[string, string]>> => fc.oneof(
    { weight: 8, arbitrary: fc.constant([['authorization', `Bearer ${account.key}`]] as Array<[string, string]>) },
    { weight: 4, arbitrary: fc.oneof(
      fc.constant<Array<[string, string]>>([]),
      fc.constantFrom('Bearer', 'Bearer ', `bearer ${account.key}`, `Bearer  ${account.key}  `, `Basic ${account.key}`, account.key,
        `Bearer ${account.key}x`, `Bearer ${account.key.slice(0, -1)}`, `Bearer svc_test_${account.key.slice(9)}`, `Bearer ${ADMIN}`,
        `Bearer ${account.key} extra`, `Bearer ${'a'.repeat(5000)}`, 'Bearer svc_live_', 'Bearer svc_live_\u00ff\u00fe')
        .map((v) => [['authorization', v]] as Array<[string, string]>),
      fc.string({ maxLength: 80, unit: 'binary-ascii' }).filter((s) => !/[\r\n]/.test(s))
        .map((s) => [['authorization', `Bearer ${s}`]] as Array<[string, string]>),
      fc.constant([['authorization', `Bearer ${account.key}`], ['authorization', 'Bearer nope']] as Array<[string, string]>),
      fc.constant([['authorization', 'Bearer nope'], ['authorization', `Bearer ${account.key}`]] as Array<[string, string]>),
    ) },
  );

  /** Other headers: garbage Idempotency-Keys and request ids, huge or many headers, junk names. */
  const extraHeaders: fc.Arbitrary<Array<[string, string]>> = fc.array(fc.oneof(
    fc.string({ maxLength: 300, unit: 'binary-ascii' }).filter((s) => !/[\r\n]/.test(s)).map((v): [string, string] => ['idempotency-key', v]),
    fc.constantFrom('', ' ', 'k'.repeat(256), '\u00e9t\u00e9', 'a b').map((v): [string, string] => ['idempotency-key', v]),
    fc.string({ maxLength: 200, unit: 'binary-ascii' }).filter((s) => !/[\r\n]/.test(s)).map((v): [string, string] => ['x-request-id', v]),
    // Node takes 16 KiB of headers: past that, 431.
    fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: 12_000 }) }, { weight: 1, arbitrary: fc.integer({ min: 12_000, max: 40_000 }) })
      .map((n): [string, string] => ['x-padding', 'p'.repeat(n)]),
    fc.constantFrom<[string, string]>(['expect', '100-continue'], ['connection', 'close'], ['accept', 'text/event-stream'],
      ['accept-encoding', 'gzip, br'], ['x-forwarded-for', '::1, 300.1.1.1'], ['host', ''], ['upgrade', 'websocket']),
    fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,30}$/).map((name): [string, string] => [name, 'v']),
  ), { maxLength: 4 }).chain((hs) => fc.nat({ max: 3 }).map((many) => many === 3 ? [...hs, ...Array.from({ length: 120 }, (_, i): [string, string] => [`x-h${i}`, 'v'])] : hs));

  const send = async (request: RawRequest, what: string, refused = false): Promise<void> => {
    const res = await conn.send(request);
    assertHostileAnswer(res, what, { head: request.method === 'HEAD', refused });
    const code = res.status >= 400 && request.method !== 'HEAD' ? (JSON.parse(res.body.toString('utf8')) as { error: { code: string } }).error.code : '';
    const key = `${res.status} ${code}`.trim();
    tally.set(key, (tally.get(key) ?? 0) + 1);
  };

  /** Reports the answers the last property saw, by status and code, and starts a new tally. */
  const report = (t: TestContext): void => {
    t.diagnostic([...tally].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k}: ${n}`).join(', '));
    tally = new Map();
  };

  const describeRequest = (r: RawRequest) => `${r.method} ${r.path.slice(0, 200)} [${r.headers.map(([k, v]) => `${k}: ${v.slice(0, 60)}`).join('; ')}] ${r.body?.subarray(0, 200).toString('latin1') ?? ''}`;

  it('refuses every generated chat-completions body with a 4xx error body', async (t) => {
    const arb = fc.record({
      auth: authHeaders(), types: contentTypes, extra: extraHeaders, body: hostileChatBody, query: queryJunk, chunked: fc.boolean(),
    });
    await fc.assert(fc.asyncProperty(arb, async ({ auth, types, extra, body, query, chunked }) => {
      const headers: Array<[string, string]> = [...auth, ...types.map((t): [string, string] => ['content-type', t]), ...extra];
      let bytes = body.bytes;
      if (chunked && bytes.length > 0) {
        headers.push(['transfer-encoding', 'chunked']);
        bytes = Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n0\r\n\r\n')]);
      }
      const request: RawRequest = { method: 'POST', path: `${CHAT}${query}`, headers, body: bytes };
      await send(request, `${body.kind}: ${describeRequest(request)}`, true);
    }), fcOptions(runs(0.38)));
    report(t);
  });

  it('refuses valid requests it cannot afford with a 4xx, whatever their Idempotency-Key and headers', async (t) => {
    const arb = fc.record({ types: contentTypes, extra: extraHeaders, body: unaffordableChatBody });
    await fc.assert(fc.asyncProperty(arb, async ({ types, extra, body }) => {
      const headers: Array<[string, string]> = [['authorization', `Bearer ${poor.key}`], ...types.map((t): [string, string] => ['content-type', t]), ...extra];
      const request: RawRequest = { method: 'POST', path: CHAT, headers, body };
      await send(request, `unaffordable: ${describeRequest(request)}`, true);
    }), fcOptions(runs(0.04)));
    report(t);
  });

  it('answers every public route, under hostile headers, with a 4xx error body or a well-formed 2xx', async (t) => {
    const routes = fc.constantFrom<[string, string]>(
      ['POST', CHAT], ['GET', '/v1/models'], ['GET', '/v1/models/svc-fast'], ['GET', '/v1/models/nope'], ['GET', '/v1/credits'],
      ['GET', '/v1/usage'], ['GET', '/v1/api-keys'], ['POST', '/v1/api-keys'], ['DELETE', '/v1/api-keys/key_nope'],
      ['GET', '/admin/v1/accounts'], ['POST', '/admin/v1/accounts'], ['GET', '/admin/v1/accounts/acct_nope'],
      ['POST', '/admin/v1/accounts/acct_nope/grants'], ['GET', '/admin/v1/accounts/acct%00nope'], ['DELETE', '/v1/api-keys/key_%00'], ['GET', '/v1/usage?model=%00'], ['POST', '/admin/v1/accounts/acct_nope/api-keys'], ['GET', '/admin/v1/upstreams'],
      ['GET', '/healthz'], ['GET', '/readyz'],
    );
    const adminAuth = fc.constantFrom<Array<[string, string]>>([['authorization', `Bearer ${ADMIN}`]], [['authorization', `Bearer ${ADMIN}x`]], []);
    const arb = fc.record({
      route: routes, auth: authHeaders(), admin: adminAuth, useAdmin: fc.boolean(), types: contentTypes, extra: extraHeaders,
      chatBody: hostileChatBody, query: queryJunk,
      otherBody: fc.oneof(fc.json({ maxDepth: 3 }), fc.string({ maxLength: 100 }), fc.constant(''), fc.constantFrom('{"name":"\\u0000"}', '{"name":"a\\u0000","environment":"test"}')),
    });
    await fc.assert(fc.asyncProperty(arb, async ({ route: [method, path], auth, admin, useAdmin, types, extra, chatBody, otherBody, query }) => {
      const isChat = path === CHAT;
      const body = method === 'POST' ? (isChat ? chatBody.bytes : Buffer.from(otherBody)) : undefined;
      const headers: Array<[string, string]> = [...(useAdmin && path.startsWith('/admin') ? admin : auth), ...extra];
      if (body !== undefined) headers.push(...types.map((t): [string, string] => ['content-type', t]));
      const request: RawRequest = { method, path: `${path}${query}`, headers, body };
      await send(request, describeRequest(request), isChat);
    }), fcOptions(runs(0.3)));
    report(t);
  });

  it('answers random paths, encoded bytes, dot segments and methods with 404/405 or a well-formed answer', async (t) => {
    const methods = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD', 'TRACE', 'get', 'FOO', 'CONNECT');
    const path = fc.tuple(fc.array(pathSegment, { minLength: 0, maxLength: 6 }), queryJunk, fc.constantFrom('', '/', '//'))
      .map(([segments, query, lead]) => `/${lead.slice(1)}${segments.join('/')}${query}`);
    const rawBytes = fc.uint8Array({ minLength: 1, maxLength: 8 }).map((b) => `/v1/${Buffer.from(b.map((x) => x | 0x80)).toString('latin1')}`);
    const arb = fc.record({
      method: methods, path: fc.oneof({ weight: 9, arbitrary: path }, { weight: 1, arbitrary: rawBytes }),
      auth: fc.constantFrom<Array<[string, string]>>([['authorization', `Bearer ${account.key}`]], [['authorization', `Bearer ${ADMIN}`]], []),
      body: fc.option(fc.json({ maxDepth: 2 }), { nil: undefined }),
    });
    await fc.assert(fc.asyncProperty(arb, async ({ method, path: target, auth, body }) => {
      const request: RawRequest = {
        method, path: method === 'CONNECT' ? `127.0.0.1:${port}` : target, headers: [...auth, ['content-type', 'application/json']],
        body: body === undefined ? undefined : Buffer.from(body),
      };
      // Admin writes under the admin token on random paths could only reach ids that do not exist.
      await send(request, describeRequest(request));
    }), fcOptions(runs(0.25)));
    report(t);
  });

  it('answers bytes that are not HTTP, and HTTP it will not take, with a 4xx error body and a closed connection', async () => {
    const heads = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 200 }).map((b) => Buffer.concat([Buffer.from(b), Buffer.from('\r\n\r\n')])),
      fc.constantFrom(
        'GET /v1/models HTTP/9.9\r\n\r\n', 'GET /v1/models HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n',
        'POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n',
        'POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n12345',
        'POST /v1/chat/completions HTTP/1.1\r\ncontent-length: -1\r\n\r\n', 'POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 1e3\r\n\r\n',
        'POST /v1/chat/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n',
        'GET /v1/models HTTP/1.1\r\nx: a\u0000b\r\n\r\n', 'GET /v1/mo\u0000dels HTTP/1.1\r\n\r\n', ' / HTTP/1.1\r\n\r\n',
        `GET /${'a'.repeat(70_000)} HTTP/1.1\r\n\r\n`, 'GET /v1/models HTTP/1.1\r\n\r\n', 'GET /healthz HTTP/1.0\r\n\r\n', `GET /v1/models HTTP/1.1\r\n${'x-a: b\r\n'.repeat(3000)}\r\n`,
      ).map((s) => Buffer.from(s, 'latin1')),
    );
    await fc.assert(fc.asyncProperty(heads, async (head) => {
      const res = await conn.send(head);
      const what = `raw ${JSON.stringify(head.subarray(0, 120).toString('latin1'))}`;
      assertHostileAnswer(res, what);
      conn.close();
    }), fcOptions(runs(0.03)));
  });

  it('answers bodies near and over the 8 MiB limit with 400/404/413, never a 5xx', async () => {
    const sizes = fc.constantFrom(BODY_LIMIT - 200, BODY_LIMIT - 1, BODY_LIMIT, BODY_LIMIT + 1, BODY_LIMIT + 4096, BODY_LIMIT + 1_000_000);
    const where = fc.constantFrom('content', 'user', 'model', 'garbage');
    await fc.assert(fc.asyncProperty(sizes, where, async (size, field) => {
      const shell = field === 'content' ? ['{"model":"svc-fast","messages":[{"role":"user","content":"', '"}]}']
        : field === 'user' ? ['{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"user":5,"x":"', '"}']
          : field === 'model' ? ['{"messages":[{"role":"user","content":"hi"}],"model":"x-', '"}'] : ['{"a":[', ']'];
      const fill = Math.max(0, size - shell[0]!.length - shell[1]!.length);
      const filler = field === 'garbage' ? '1,'.repeat(Math.floor(fill / 2)) : 'word '.repeat(Math.ceil(fill / 5)).slice(0, fill);
      const body = Buffer.from(`${shell[0]}${filler}${shell[1]}`);
      const res = await conn.send({ method: 'POST', path: CHAT, headers: [['authorization', `Bearer ${account.key}`], ['content-type', 'application/json']], body });
      assertHostileAnswer(res, `${field} body of ${body.length} bytes`, { refused: true });
      if (body.length > BODY_LIMIT) assert.equal(res.status, 413);
    }), fcOptions(Math.max(4, runs(0.001))));
  });

  it('answers a body sent in pieces with pauses as it answers the whole body', async () => {
    await fc.assert(fc.asyncProperty(hostileChatBody, fc.integer({ min: 2, max: 5 }), fc.integer({ min: 5, max: 120 }), async (body, pieces, pauseMs) => {
      const slow = new RawConnection(port);
      try {
        const socket = await slow.open();
        const bytes = encodeRequest({ method: 'POST', path: CHAT, headers: [['authorization', `Bearer ${account.key}`], ['content-type', 'application/json']], body: body.bytes });
        const step = Math.ceil(bytes.length / pieces);
        for (let at = 0; at < bytes.length; at += step) {
          socket.write(bytes.subarray(at, at + step));
          await sleep(pauseMs);
        }
        const res = await slow.send(Buffer.alloc(0));
        assertHostileAnswer(res, `${body.kind} in ${pieces} pieces`, { refused: true });
      } finally {
        slow.close();
      }
    }), fcOptions(Math.max(5, runs(0.002))));
  });

  it('holds nothing for a valid request whose body never arrives: cut off, or left hanging until the request timeout', async () => {
    const valid = Buffer.from(JSON.stringify({ model: 'svc-fast', max_tokens: 5, messages: [{ role: 'user', content: 'hello' }] }));
    await fc.assert(fc.asyncProperty(fc.integer({ min: 0, max: valid.length - 1 }), fc.integer({ min: 1, max: 1_000_000 }), fc.boolean(), async (sent, missing, hang) => {
      const cut = new RawConnection(port, 10_000);
      try {
        const socket = await cut.open();
        const head = `POST ${CHAT} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${account.key}\r\ncontent-type: application/json\r\ncontent-length: ${valid.length + missing}\r\n\r\n`;
        socket.write(Buffer.concat([Buffer.from(head), valid.subarray(0, sent)]));
        if (!hang) {
          socket.end();
          await sleep(20);
          return;
        }
        // Left open: the gateway answers 408 once request_timeout_ms passes, or closes the connection.
        const res = await cut.send(Buffer.alloc(0)).catch((err: Error) => err);
        if (!(res instanceof Error)) {
          assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}`);
          assertErrorBody(res, 'hanging upload');
        } else {
          assert.match(res.message, /connection closed/, res.message);
        }
      } finally {
        cut.close();
      }
    }), fcOptions(Math.max(6, runs(0.001))));
  });

  // Regressions the properties found: Node drops a CONNECT unanswered, and refuses a Host-less HTTP/1.1 request with a bare 400.
  it('answers CONNECT with 405 and the error body instead of dropping the connection', async () => {
    const res = await new RawConnection(port).send({ method: 'CONNECT', path: '/?', headers: [['authorization', `Bearer ${account.key}`]] });
    assert.equal(res.status, 405);
    assertErrorBody(res, 'CONNECT');
    assert.equal(JSON.parse(res.body.toString()).error.code, 'method_not_allowed');
  });

  it('answers an HTTP/1.1 request without Host with 400 and the error body', async () => {
    const res = await new RawConnection(port).send(Buffer.from(`GET /v1/credits HTTP/1.1\r\nauthorization: Bearer ${account.key}\r\n\r\n`));
    assert.equal(res.status, 400);
    assertErrorBody(res, 'no Host');
    assert.deepEqual(JSON.parse(res.body.toString()).error.param, 'Host');
  });

  // Found on PostgreSQL, whose text cannot hold U+0000: each of these was a 500 there (SQLite took them).
  it('refuses the NUL character in ids, cursors, filters and names with 400, on both stores', async () => {
    const key = `Bearer ${account.key}`;
    const admin = `Bearer ${ADMIN}`;
    const cases: Array<[string, string, string, string, string?]> = [
      ['GET', '/admin/v1/accounts?after=%00', admin, 'after'], ['GET', '/admin/v1/accounts/a%00b', admin, 'id'],
      ['POST', '/admin/v1/accounts/a%00b/grants', admin, 'id', '{"kind":"purchased","amount":1}'],
      ['POST', '/admin/v1/accounts/a%00b/api-keys', admin, 'id', '{}'], ['POST', '/admin/v1/accounts', admin, 'name', '{"name":"a\\u0000b"}'],
      ['POST', '/v1/api-keys', key, 'name', '{"name":"a\\u0000b"}'], ['DELETE', '/v1/api-keys/key_%00', key, 'id'],
      ['GET', '/v1/usage?model=%00', key, 'model'],
    ];
    for (const [method, path, authorization, param, body] of cases) {
      const res = await conn.send({ method, path, headers: [['authorization', authorization], ['content-type', 'application/json']], body: body === undefined ? undefined : Buffer.from(body) });
      assert.equal(res.status, 400, `${method} ${path}: ${res.body.toString()}`);
      assertErrorBody(res, `${method} ${path}`);
      assert.equal((JSON.parse(res.body.toString()) as { error: { param: string } }).error.param, param, `${method} ${path}`);
    }
  });

  it('stays up, and not one credit, hold or ledger row moved', async () => {
    const health = await new RawConnection(port).send({ method: 'GET', path: '/healthz', headers: [] });
    assert.equal(health.status, 200);
    const now = await snapshot();
    assert.deepEqual(now.credits, before0.credits);
    assert.deepEqual(now.poor, before0.poor);
    assert.equal(now.credits.reserved_credits, 0);
    assert.deepEqual({ ledger: now.ledgerRows, account: now.accountRows, reservations: now.reservations },
      { ledger: before0.ledgerRows, account: before0.accountRows, reservations: before0.reservations });
    assert.ok(now.keys >= 1, 'the funded key is still there');
    const verify = await ledgerVerifyCli(gw.databaseUrl);
    assert.equal(verify.code, 0, `${verify.stdout}\n${verify.stderr}`);
  });
});
