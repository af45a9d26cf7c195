/**
 * Slow and idle clients cannot keep sockets forever (slowloris): a request must
 * arrive within `server.request_timeout_ms` (its headers within
 * `headers_timeout_ms`), an idle kept-alive connection closes after
 * `keep_alive_timeout_ms`, and connections over `max_connections` are closed
 * as they arrive. Answering may take as long as it takes: a slow stream and a
 * slow JSON answer outlive the request timeout. Raw sockets play the clients;
 * the test runner's timeouts bound the waits.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { DEFAULT_CONFIG_SOURCE } from '../../src/config.js';
import { startGateway, useGatewayWithUpstream, type TestGateway } from '../support/gateway.js';
import { aliasesConfig, call, parseSse } from '../support/e2e.js';

const SHORT = { request_timeout_ms: 1000, headers_timeout_ms: 500, keep_alive_timeout_ms: 500 };
/** Each case's bound: several times the configured timeouts, far below what an unset timeout allows. */
const BOUND = { timeout: 8_000 };

interface RawClient {
  socket: Socket;
  /** Everything the gateway sent so far. */
  received(): string;
  /** Resolves with everything received once the gateway closes the connection. */
  closed: Promise<string>;
}

const open = new Set<Socket>();

/** A raw TCP connection to the gateway, closed by `after` should a case fail before the gateway closes it. */
function rawClient(gw: Pick<TestGateway, 'origin'>): Promise<RawClient> {
  const { hostname, port } = new URL(gw.origin);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    open.add(socket);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => { text += chunk; });
    // Writes racing the gateway's close may fail; the close is what the cases look at.
    socket.on('error', () => {});
    const closed = new Promise<string>((done) => socket.once('close', () => {
      open.delete(socket);
      done(text);
    }));
    socket.once('connect', () => resolve({ socket, received: () => text, closed }));
    socket.once('error', reject);
  });
}

/** Writes `text` one character every `everyMs` until it is all sent or the socket closes. */
function trickle(socket: Socket, text: string, everyMs: number): void {
  let at = 0;
  const timer = setInterval(() => {
    if (socket.destroyed || at >= text.length) return clearInterval(timer);
    socket.write(text[at++]!);
  }, everyMs);
  socket.once('close', () => clearInterval(timer));
}

/** Resolves once `received()` matches `pattern`. */
function until(client: RawClient, pattern: RegExp): Promise<void> {
  return new Promise((resolve) => {
    const check = () => {
      if (!pattern.test(client.received())) return;
      client.socket.off('data', check);
      resolve();
    };
    client.socket.on('data', check);
    check();
  });
}

after(() => {
  for (const socket of open) socket.destroy();
});

function assert408(received: string): void {
  assert.match(received, /^HTTP\/1\.1 408 /, `expected a 408, got ${JSON.stringify(received.slice(0, 200))}`);
  const body = JSON.parse(received.slice(received.indexOf('\r\n\r\n') + 4)) as { error: { type: string; code: string } };
  assert.deepEqual([body.error.type, body.error.code], ['invalid_request_error', 'request_timeout']);
}

describe('slow clients', () => {
  let gw: TestGateway;
  let key: string;
  before(async () => {
    gw = await startGateway({ config: { ...DEFAULT_CONFIG_SOURCE, server: SHORT } });
    key = (await gw.createAccount({ purchased: 1_000 })).key;
  });
  after(async () => {
    for (const socket of open) socket.destroy();
    await gw.close();
  });

  it('answers 408 and closes a connection whose body trickles in past request_timeout_ms', BOUND, async () => {
    const client = await rawClient(gw);
    const body = JSON.stringify({ model: 'svc-fast', messages: [{ role: 'user', content: 'x'.repeat(200) }] });
    client.socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`);
    trickle(client.socket, body, 200);
    assert408(await client.closed);
  });

  it('closes an unauthenticated connection that keeps trickling a body after its 401', BOUND, async () => {
    const client = await rawClient(gw);
    client.socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n');
    trickle(client.socket, '{'.repeat(1000), 200);
    const received = await client.closed;
    assert.match(received, /^HTTP\/1\.1 401 /);
  });

  it('answers 408 and closes a connection whose headers trickle in past headers_timeout_ms', BOUND, async () => {
    const client = await rawClient(gw);
    client.socket.write('GET /v1/models HTTP/1.1\r\nHost: gw\r\n');
    trickle(client.socket, 'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n'.repeat(20), 100);
    assert408(await client.closed);
  });

  it('closes a connection that sends nothing', BOUND, async () => {
    const client = await rawClient(gw);
    assert408(await client.closed);
  });

  it('closes a kept-alive connection left idle past keep_alive_timeout_ms', BOUND, async () => {
    const client = await rawClient(gw);
    client.socket.write('GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n');
    await until(client, /\r\n\r\n/);
    const received = await client.closed;
    assert.match(received, /^HTTP\/1\.1 200 /);
    assert.doesNotMatch(received, /connection: close/i, 'the answer kept the connection alive');
    assert.equal(received.match(/HTTP\/1\.1 /g)?.length, 1, 'nothing else was sent');
  });

  it('still serves a client that sends its request in time', async () => {
    const res = await call(gw, 'POST', '/v1/chat/completions', { key, body: { model: 'svc-fast', messages: [{ role: 'user', content: 'hi' }] } });
    assert.equal(res.status, 200, res.text);
  });
});

describe('max_connections', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ config: { ...DEFAULT_CONFIG_SOURCE, server: { max_connections: 3 } } });
  });
  after(async () => {
    for (const socket of open) socket.destroy();
    await gw.close();
  });

  it('closes a connection over the cap as it arrives, without an answer', BOUND, async () => {
    const held: RawClient[] = [];
    for (let i = 0; i < 3; i += 1) {
      const client = await rawClient(gw);
      client.socket.write('GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n');
      await until(client, /^HTTP\/1\.1 200 [\s\S]*\r\n\r\n/);
      held.push(client);
    }
    const extra = await rawClient(gw);
    extra.socket.write('GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n');
    assert.equal(await extra.closed, '', 'the extra connection got no answer');
    for (const client of held) assert.equal(client.socket.destroyed, false, 'the connections within the cap stay open');
    for (const client of held) client.socket.destroy();
  });
});

describe('answers longer than request_timeout_ms', () => {
  const env = useGatewayWithUpstream((url) => ({
    ...(aliasesConfig(url, { 'slow-stream': ['slow-1500-stall-1500'], 'slow-json': ['slow-2500'] }, { first_byte_timeout_ms: 10_000 }) as object),
    server: SHORT,
  }), { reply: 'one two three four' });

  it('streams to the end a completion that takes longer than request_timeout_ms', { timeout: 15_000 }, async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const started = Date.now();
    const res = await call(gw, 'POST', '/v1/chat/completions', {
      key: account.key, body: { model: 'slow-stream', stream: true, messages: [{ role: 'user', content: 'go' }] },
    });
    assert.equal(res.status, 200, res.text);
    assert.ok(Date.now() - started > SHORT.request_timeout_ms, 'the answer outlived the request timeout');
    const { data, comments } = parseSse(res.text);
    assert.equal(data.at(-1), '[DONE]');
    assert.ok(comments.includes(': ping'), 'it pinged while the upstream was slow');
    const content = data.slice(0, -1).map((d) => JSON.parse(d) as { choices: Array<{ delta: { content?: string } }> })
      .map((c) => c.choices[0]?.delta.content ?? '').join('');
    assert.equal(content, 'one two three four');
  });

  it('answers in JSON a completion that takes longer than request_timeout_ms', { timeout: 15_000 }, async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 100_000 });
    const completion = await gw.client(account.key).chat.completions.create({ model: 'slow-json', messages: [{ role: 'user', content: 'go' }] });
    assert.equal(completion.choices[0]?.message.content, 'one two three four');
  });
});

describe('server settings', () => {
  it('reach the HTTP server', async () => {
    const server = { request_timeout_ms: 40_000, headers_timeout_ms: 7_000, keep_alive_timeout_ms: 65_000, connection_timeout_ms: 900_000, max_connections: 123 };
    const gw = await startGateway({ config: { ...DEFAULT_CONFIG_SOURCE, server } });
    try {
      const http = gw.app.server;
      assert.deepEqual(
        [http.requestTimeout, http.headersTimeout, http.keepAliveTimeout, http.timeout, http.maxConnections],
        [40_000, 7_000, 65_000, 900_000, 123],
      );
    } finally {
      await gw.close();
    }
  });
});
