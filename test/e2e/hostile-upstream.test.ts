/**
 * A hostile upstream (issue 11, item 4): fast-check drives an OpenAI-compatible
 * server that answers with generated garbage (random bytes, broken or mistyped
 * SSE frames, wrong usage figures, JSON for SSE and the reverse, any status,
 * enormous and endless bodies). Whatever it sends, the caller gets a 200 with a
 * well-formed answer or the contract's 502/504 (or its error chunk in a
 * stream); the charge never passes the reservation and the hold is always
 * released; the gateway lets every endless answer go and its memory stays
 * bounded; `ledger verify` is clean at the end.
 */
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { startGateway, type TestGateway } from '../support/gateway.js';
import { aliasesConfig, credits, parseSse } from '../support/e2e.js';
import { ledgerVerifyCli, waitFor } from '../support/e2e-helpers.js';
import { FC_SEED } from '../support/hostile-checks.js';
import { creditsFor, DEFAULT_MAX_OUTPUT } from '../../src/metering/pricing.js';
import { countPromptTokens } from '../../src/metering/tokens.js';
import { scenario as scenarioArb, startGarbageUpstream, type GarbageUpstream, type Scenario } from '../support/garbage-upstream.js';

/** Cases per run: FC_UPSTREAM_RUNS, default 300 (each is a whole completion). */
const RUNS = process.env.FC_UPSTREAM_RUNS === undefined ? 300 : Number(process.env.FC_UPSTREAM_RUNS);
const PRICE = { input_credits_per_1k: 100, output_credits_per_1k: 1000 };
const UPSTREAM_ERRORS = new Set(['upstream_unavailable', 'upstream_timeout']);
const MESSAGES = [{ role: 'user' as const, content: 'hello' }];
const PROMPT_TOKENS = countPromptTokens(MESSAGES);
/**
 * The most a request may be charged, whatever the upstream reports: the contract
 * settles on the upstream's usage (above the reservation when its prompt count
 * is higher than the gateway's estimate, from what is available), but the gateway
 * believes at most twice its own prompt count plus 64, and no more output than
 * the max_tokens it sent (as hardening.test.ts pins down).
 */
const chargeBound = (maxOutput: number) => creditsFor(PROMPT_TOKENS * 2 + 64, maxOutput, PRICE);

interface ErrorFields { message: unknown; type: unknown; code: unknown; param: unknown }

function assertErrorFields(error: ErrorFields | undefined, what: string): void {
  assert.ok(error, what);
  assert.equal(typeof error.message, 'string', what);
  assert.ok((error.message as string).length > 0, what);
  assert.doesNotMatch(error.message as string, /\n\s+at /, `${what}: no stack trace`);
  assert.equal(error.type, 'upstream_error', what);
  assert.ok(UPSTREAM_ERRORS.has(error.code as string), `${what}: code ${String(error.code)}`);
}

/** The heap in use after a full collection (gc exposed at run time, as --expose-gc would). */
function retainedHeap(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  return process.memoryUsage().heapUsed;
}

const isCount = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

/** The answer the caller got: a 200 well formed, or the contract's upstream error; returns credits_used when it says. */
function checkAnswer(status: number, contentType: string, text: string, stream: boolean, what: string): number | null {
  const brief = `${what} -> ${status} ${text.slice(0, 400)}`;
  if (status === 502 || status === 504) {
    assert.match(contentType, /^application\/json/, brief);
    const body = JSON.parse(text) as { error?: ErrorFields };
    assert.deepEqual(Object.keys(body), ['error'], brief);
    assertErrorFields(body.error, brief);
    assert.equal(body.error!.code, status === 502 ? 'upstream_unavailable' : 'upstream_timeout', brief);
    return null;
  }
  assert.equal(status, 200, `not 200, 502 or 504: ${brief}`);
  if (!stream) {
    assert.match(contentType, /^application\/json/, brief);
    const body = JSON.parse(text) as { choices: Array<{ message: { content: unknown }; finish_reason: unknown }>; usage: Record<string, unknown>; svc: { credits_used: number } };
    assert.equal(body.choices.length, 1, brief);
    assert.ok(typeof body.choices[0]!.message.content === 'string' || body.choices[0]!.message.content === null, brief);
    assert.equal(typeof body.choices[0]!.finish_reason, 'string', brief);
    for (const field of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.ok(isCount(body.usage[field]), `${brief}: usage.${field}`);
    assert.ok(isCount(body.svc.credits_used), brief);
    return body.svc.credits_used;
  }
  assert.match(contentType, /^text\/event-stream/, brief);
  const { data } = parseSse(text);
  assert.equal(data.at(-1), '[DONE]', `${brief}: ends with [DONE]`);
  assert.equal(data.filter((d) => d === '[DONE]').length, 1, brief);
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as { error?: ErrorFields; svc?: { credits_used: number }; usage?: Record<string, unknown> });
  const last = chunks.at(-1);
  assert.ok(last, `${brief}: a stream with no chunk`);
  chunks.slice(0, -1).forEach((c) => assert.equal(c.error, undefined, `${brief}: an error chunk before the last`));
  if (last.error) assertErrorFields(last.error, brief);
  assert.ok(last.svc && isCount(last.svc.credits_used), `${brief}: the last chunk carries svc`);
  if (last.usage) for (const field of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.ok(isCount(last.usage[field]), `${brief}: usage.${field}`);
  return last.svc.credits_used;
}

const describeScenario = (s: Scenario) => JSON.stringify({
  ...s, body: s.body.kind === 'enormous' || s.body.kind === 'endless' ? { ...s.body, unit: s.body.unit.slice(0, 60) } : s.body,
}).slice(0, 1500);

describe(`hostile upstream (fast-check seed ${FC_SEED})`, () => {
  let upstream: GarbageUpstream;
  let gw: TestGateway;
  let account: { accountId: string; key: string };
  /** What the caller got, by mode and status, reported as a diagnostic. */
  const tally = new Map<string, number>();

  before(async () => {
    upstream = await startGarbageUpstream();
    gw = await startGateway({
      config: aliasesConfig(upstream.url, { hostile: ['garbage-model'] }, {
        first_byte_timeout_ms: 300, stream_idle_timeout_ms: 300, max_request_ms: 2_000, breaker: { failures: 1_000_000, cooldown_ms: 1 },
      }, PRICE),
    });
    account = await gw.createAccount({ purchased: 100_000_000 });
  });
  after(async () => {
    await upstream.close();
    await gw.close();
  });

  /** One completion against the current scenario; every bound checked on its way out. */
  const oneCase = async (s: Scenario, stream: boolean, maxTokens: number | null): Promise<void> => {
    upstream.scenario = s;
    const what = `stream=${stream} max_tokens=${maxTokens} ${describeScenario(s)}`;
    const before = await credits(gw, account.key);
    const response = await fetch(`${gw.origin}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${account.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'hostile', messages: MESSAGES, stream, ...(maxTokens !== null && { max_tokens: maxTokens }) }),
    });
    const text = await response.text();
    const used = checkAnswer(response.status, response.headers.get('content-type') ?? '', text, stream, what);
    const outcome = `${stream ? 'stream' : 'json'} ${response.status}${stream && response.status === 200 && /"error":\{/.test(text) ? ' error-chunk' : ''}`;
    tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
    // The hold is released (a stream settles as its last chunk goes out) and the charge keeps within it.
    const held = () => gw.rows<{ n: number | string }>(`SELECT COUNT(*) AS n FROM reservations WHERE account_id = ? AND state = 'held'`, account.accountId);
    await waitFor(held, (rows) => Number(rows[0]!.n) === 0, `no hold left: ${what}`);
    const [last] = await gw.rows<{ amount: number | string; charged: number | string; state: string }>(
      'SELECT amount, charged, state FROM reservations WHERE account_id = ? ORDER BY created_at DESC, id DESC LIMIT 1', account.accountId);
    const after = await credits(gw, account.key);
    assert.equal(after.reserved_credits, 0, what);
    const drop = before.total_credits - after.total_credits;
    assert.ok(last, what);
    const maxOutput = maxTokens ?? DEFAULT_MAX_OUTPUT;
    assert.equal(Number(last.amount), creditsFor(PROMPT_TOKENS, maxOutput, PRICE), `the reservation: ${what}`);
    assert.ok(Number(last.charged) <= chargeBound(maxOutput), `charged ${last.charged}, past the bound ${chargeBound(maxOutput)} (reserved ${last.amount}): ${what}`);
    // With no usage reported the gateway counts itself: its own prompt estimate, output within max_tokens, so within the reservation.
    if (s.body.kind === 'plausible' && s.body.usage === null) {
      assert.ok(Number(last.charged) <= Number(last.amount), `charged ${last.charged} over the reservation ${last.amount} on its own count: ${what}`);
    }
    assert.equal(drop, Number(last.charged), `the balance dropped by what was charged: ${what}`);
    if (used !== null) assert.equal(used, drop, `svc.credits_used is what the balance lost: ${what}`);
    // The gateway lets the upstream's answer go, endless or hanging alike.
    await waitFor(async () => upstream.open, (open) => open === 0, `the upstream answer let go: ${what}`);
  };

  it(`answers ${RUNS} generated garbage upstreams with a 200 or the contract's error, charging within its bound`, { timeout: 600_000 }, async (t) => {
    const request = fc.record({ stream: fc.boolean(), maxTokens: fc.option(fc.integer({ min: 1, max: 64 }), { nil: null }) });
    await fc.assert(fc.asyncProperty(scenarioArb, request, async (s, { stream, maxTokens }) => {
      await oneCase(s, stream, maxTokens);
    }), { seed: FC_SEED, numRuns: RUNS, includeErrorInReport: true });
    t.diagnostic([...tally].sort().map(([k, n]) => `${k}: ${n}`).join(', '));
  });

  it('stops reading endless streams at its bounds: memory stays bounded and each answer is let go', { timeout: 120_000 }, async (t) => {
    const units = ['data: {"choices":[{"index":0,"delta":{"content":"more "},"finish_reason":null}]}\n\n', ': ping\n\n', 'z'.repeat(65_536), `data: ${'q'.repeat(65_530)}`];
    const rssBefore = process.memoryUsage().rss;
    const heapBefore = retainedHeap();
    let written = 0;
    let most = 0;
    for (const unit of units) {
      for (const stream of [true, false]) {
        for (const maxTokens of [null, 5]) {
          const start = upstream.written;
          await oneCase({ delayMs: 0, status: 200, contentType: stream ? 'text/event-stream' : 'application/json', body: { kind: 'endless', unit } }, stream, maxTokens);
          written += upstream.written - start;
          most = Math.max(most, upstream.written - start);
        }
      }
    }
    const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
    const grown = process.memoryUsage().rss - rssBefore;
    const retained = retainedHeap() - heapBefore;
    t.diagnostic(`16 endless answers: ${mb(written)} MB sent (at most ${mb(most)} MB for one) before the gateway let go; ` +
      `RSS grew ${mb(grown)} MB, the heap kept ${mb(retained)} MB after GC`);
    assert.ok(grown < 200 * 1024 * 1024, `RSS grew ${mb(grown)} MB`);
    assert.ok(retained < 32 * 1024 * 1024, `the heap kept ${mb(retained)} MB after GC`);
    // The gateway stops reading at its bounds: 8 MiB of JSON, the output bound, or max_request_ms.
    assert.ok(most < 128 * 1024 * 1024, `one endless answer sent ${mb(most)} MB before the gateway let go`);
  });

  it('stays up, and `ledger verify` accepts the ledger', async () => {
    assert.equal((await fetch(`${gw.origin}/healthz`)).status, 200);
    const result = await ledgerVerifyCli(gw.databaseUrl);
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
  });
});
