/**
 * The completion log line: exactly one info line, `msg: "completion"`, per chat
 * completion (JSON and stream, success and failure), with ids, alias, upstream,
 * status, credits, tokens and timings; never the key, and the prompt only when
 * `logging.prompts` is on.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { startGateway, type TestAccount, type TestGateway } from '../support/gateway.js';
import { aliasesConfig, call, parseSse } from '../support/e2e.js';

const PROMPT = 'The secret plan is written in purple ink';
const messages = [{ role: 'user', content: PROMPT }];
const ALIASES = { 'l-ok': ['log-ok'], 'l-failover': ['log-error-500', 'log-backup'], 'l-broken': ['only-error-500'], 'l-cut': ['mid-cut'] };

/** The aliases above, and svc-auto choosing among them. */
function logConfig(upstreamUrl: string): Record<string, unknown> {
  const config = aliasesConfig(upstreamUrl, ALIASES) as { models: unknown[] };
  const auto = {
    id: 'svc-auto', name: 'auto', description: 'auto', context_window: 64_000,
    pricing: { input_credits_per_1k: 4, output_credits_per_1k: 12 }, auto: { simple: 'l-ok', code: 'l-failover', complex: 'l-failover' },
  };
  return { ...config, models: [...config.models, auto] };
}

interface CompletionLine {
  level: number;
  msg: string;
  reqId: string;
  request_id: string;
  account_id: string | null;
  key_id: string | null;
  alias: string | null;
  auto_alias: string | null;
  upstream: string | null;
  stream: boolean;
  status: number;
  error_code: string | null;
  credits_charged: number;
  prompt_tokens: number;
  completion_tokens: number;
  latency_ms: number;
  ttft_ms: number | null;
  prompt?: Array<{ role: string; content: string }>;
}

/** The completion lines of one request, by the id it was sent with. */
function completionLines(gw: TestGateway, requestId: string): CompletionLine[] {
  return gw.logs.map((line) => JSON.parse(line) as CompletionLine).filter((l) => l.msg === 'completion' && l.reqId === requestId);
}

let sequence = 0;
async function complete(gw: TestGateway, account: TestAccount, body: Record<string, unknown>) {
  const requestId = `log-test-${++sequence}`;
  const res = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { messages, ...body }, headers: { 'x-request-id': requestId } });
  // A stream's last byte may reach the client just before the handler writes its line.
  while (completionLines(gw, requestId).length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  await new Promise((resolve) => setImmediate(resolve));
  const lines = completionLines(gw, requestId);
  assert.equal(lines.length, 1, `exactly one completion line for ${requestId}`);
  return { res, line: lines[0]! };
}

describe('the completion log line', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  let account: TestAccount;

  before(async () => {
    upstream = await startFakeUpstream();
    gw = await startGateway({ config: logConfig(upstream.url) });
    account = await gw.createAccount({ purchased: 1_000_000 });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  it('says who asked, what served and what it cost (JSON)', async () => {
    const { res, line } = await complete(gw, account, { model: 'l-ok' });
    assert.equal(res.status, 200);
    const body = res.json as { usage: { prompt_tokens: number; completion_tokens: number }; svc: { credits_used: number } };
    assert.equal(line.level, 30, 'info');
    assert.equal(line.request_id, line.reqId);
    assert.equal(line.account_id, account.accountId);
    assert.equal(line.key_id, account.keyId);
    assert.equal(line.alias, 'l-ok');
    assert.equal(line.upstream, 'fake/log-ok');
    assert.equal(line.status, 200);
    assert.equal(line.stream, false);
    assert.equal(line.error_code, null);
    assert.equal(line.credits_charged, body.svc.credits_used);
    assert.ok(line.credits_charged > 0);
    assert.equal(line.prompt_tokens, body.usage.prompt_tokens);
    assert.equal(line.completion_tokens, body.usage.completion_tokens);
    assert.equal(typeof line.latency_ms, 'number');
    assert.equal(typeof line.ttft_ms, 'number');
  });

  it('one line for a stream, naming the upstream that served after a failover', async () => {
    const { res, line } = await complete(gw, account, { model: 'l-failover', stream: true });
    assert.equal(res.status, 200);
    const last = JSON.parse(parseSse(res.text).data.at(-2)!) as { usage: { completion_tokens: number }; svc: { credits_used: number } };
    assert.equal(line.stream, true);
    assert.equal(line.upstream, 'fake/log-backup');
    assert.equal(line.credits_charged, last.svc.credits_used);
    assert.equal(line.completion_tokens, last.usage.completion_tokens);
  });

  it('one line for a stream cut midway: status 200 with the error code, charged for what was delivered', async () => {
    const { line } = await complete(gw, account, { model: 'l-cut', stream: true });
    assert.equal(line.status, 200);
    assert.equal(line.upstream, 'fake/mid-cut');
    assert.ok(line.error_code);
    assert.ok(line.credits_charged > 0);
  });

  it('names svc-auto\'s choice beside the alias asked for', async () => {
    const { line } = await complete(gw, account, { model: 'svc-auto', messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(line.alias, 'svc-auto');
    assert.equal(line.auto_alias, 'l-ok');
    assert.equal(line.upstream, 'fake/log-ok');
  });

  it('one line for a failure, with its status and code and nothing charged', async () => {
    const { res, line } = await complete(gw, account, { model: 'l-broken' });
    assert.equal(res.status, 502);
    assert.equal(line.status, 502);
    assert.equal(line.error_code, 'upstream_unavailable');
    assert.equal(line.upstream, null);
    assert.equal(line.credits_charged, 0);
    assert.equal(line.alias, 'l-broken');
  });

  it('one line for a request refused before the ledger: an unknown alias is not echoed as one', async () => {
    const { res, line } = await complete(gw, account, { model: 'no-such-alias' });
    assert.equal(res.status, 404);
    assert.equal(line.status, 404);
    assert.equal(line.error_code, 'model_not_found');
    assert.equal(line.alias, null);
  });

  it('never logs the key or the prompt', () => {
    const all = gw.logs.join('\n');
    assert.ok(!all.includes(account.key), 'no API key');
    assert.ok(!all.includes(PROMPT), 'no prompt');
    assert.ok(!all.includes('purple ink'));
  });
});

describe('the completion log line with logging.prompts on', () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;

  before(async () => {
    upstream = await startFakeUpstream();
    gw = await startGateway({ config: { ...logConfig(upstream.url), logging: { prompts: true } } });
  });
  after(async () => {
    await gw.close();
    await upstream.close();
  });

  it('carries the messages, and still never the key', async () => {
    const account = await gw.createAccount({ purchased: 1_000_000 });
    const { line } = await complete(gw, account, { model: 'l-ok' });
    assert.deepEqual(line.prompt, [{ role: 'user', content: PROMPT }]);
    assert.ok(!gw.logs.join('\n').includes(account.key));
  });
});
