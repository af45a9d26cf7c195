/**
 * Money through HTTP, with the official openai SDK against a real gateway and
 * a fake upstream: many requests at once on one account never overdraw it,
 * and every credit charged shows up in svc, /v1/credits, /v1/usage and the ledger.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { creditsFor } from '../../src/metering/pricing.js';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import {
  completionOutcome, credits, getJson, ledgerVerifyCli, statusCounts, successes, svcIfAny, waitFor, type Outcome,
} from '../support/e2e-helpers.js';
import { countWords, startFakeUpstream, type FakeUpstream } from '../support/fake-upstream.js';
import { fakeUpstreamConfig, startGateway, TestClock, type TestGateway } from '../support/gateway.js';

const SMART = { input_credits_per_1k: 25, output_credits_per_1k: 75 };
const FAST = { input_credits_per_1k: 4, output_credits_per_1k: 12 };
const CODE = { input_credits_per_1k: 12, output_credits_per_1k: 40 };
// 40 words of one token each, so that the fake upstream's count (words) and the gateway's (o200k) agree.
const REPLY = 'one two three four five six seven eight nine ten red green blue black white cat dog bird fish tree sun moon star rain snow wind fire water stone sand hill lake road town city house door wall roof bed';
const MESSAGES = [{ role: 'user' as const, content: 'hi' }];
const MAX_TOKENS = 40;

function smart(overrides: Partial<ChatCompletionCreateParamsNonStreaming> = {}): ChatCompletionCreateParamsNonStreaming {
  return { model: 'svc-smart', messages: MESSAGES, max_tokens: MAX_TOKENS, ...overrides };
}

// What the gateway reserves (its own prompt count + max_tokens) and what the
// fake upstream then reports (1 prompt word, 40 reply words): equal here, so
// every success costs exactly COST and refusals start only when under COST is left.
const RESERVED = creditsFor(countPromptTokens(MESSAGES), MAX_TOKENS, SMART);
const COST = creditsFor(countWords('hi'), countWords(REPLY), SMART);

let upstream: FakeUpstream;
before(async () => {
  upstream = await startFakeUpstream({ reply: REPLY });
});
after(async () => {
  await upstream.close();
});

async function usageTotals(gw: TestGateway, key: string) {
  return getJson<{ total_requests: number; total_credits_spent: number; total_completion_tokens: number }>(gw, key, '/usage');
}

function assertRefusals(outcomes: Outcome[], status: number, code: string): void {
  for (const o of outcomes) {
    if (o.status === 200) continue;
    assert.equal(o.status, status, JSON.stringify(o));
    assert.ok('code' in o && o.code === code, JSON.stringify(o));
  }
}

describe('200 concurrent completions on an account that affords only some', () => {
  let gw: TestGateway;
  before(async () => {
    // 200 requests at once on a shared 2-core machine: a first byte may take seconds, which is not what this suite tests.
    gw = await startGateway({ config: fakeUpstreamConfig(upstream.url, {}, { first_byte_timeout_ms: 20_000 }) });
  });
  after(async () => {
    await gw.close();
  });

  it('JSON: 200 or 402 only, no overdraft, and every credit accounted for', async () => {
    assert.equal(RESERVED, 4);
    assert.equal(COST, 4);
    const start = 350; // 87 successes × 4 = 348, then 2 credits left
    const account = await gw.createAccount({ purchased: 250, earned: [{ amount: 100, expiresAt: '2099-01-01T00:00:00Z' }] });
    const client = gw.client(account.key);
    const outcomes = await Promise.all(Array.from({ length: 200 }, () => completionOutcome(client, smart(), false)));

    assert.deepEqual(statusCounts(outcomes), { 200: 87, 402: 113 });
    assertRefusals(outcomes, 402, 'insufficient_credits');
    const ok = successes(outcomes);
    const spent = ok.reduce((n, o) => n + o.svc.credits_used, 0);
    assert.ok(ok.every((o) => o.svc.credits_used === COST && o.svc.balance_remaining >= 0));
    assert.equal(spent, 348);

    const after = await credits(gw, account.key);
    assert.deepEqual([after.total_credits, after.reserved_credits, after.available_credits], [2, 0, 2]);
    assert.deepEqual([after.earned_credits.balance, after.purchased_credits.balance], [0, 2], 'earned credits go first');
    assert.equal(start - after.total_credits, spent);
    const usage = await usageTotals(gw, account.key);
    assert.deepEqual([usage.total_requests, usage.total_credits_spent], [87, spent]);
    assert.equal(Math.min(...ok.map((o) => o.svc.balance_remaining)), 2);
  });

  it('JSON and streaming mixed, a few letting the gateway choose max_tokens: no overdraft, exact accounting', async () => {
    const start = 400;
    const account = await gw.createAccount({ purchased: 150, earned: [{ amount: 250, expiresAt: '2099-01-01T00:00:00Z' }] });
    const client = gw.client(account.key);
    // Every 50th request leaves max_tokens to the gateway, on svc-fast: its clamped hold
    // (up to 4096 output tokens, ~50 credits) is released down to the 40 words it gets.
    const clamped = (i: number) => i % 50 === 49;
    const outcomes = await Promise.all(Array.from({ length: 200 }, (_, i) => {
      const params = clamped(i) ? smart({ model: 'svc-fast', max_tokens: null }) : smart();
      if (i % 4 === 1) params.stream_options = { include_usage: true };
      return completionOutcome(client, params, i % 2 === 1);
    }));

    const counts = statusCounts(outcomes);
    assert.deepEqual(Object.keys(counts).sort(), ['200', '402'], JSON.stringify(counts));
    assertRefusals(outcomes, 402, 'insufficient_credits');
    let spent = 0;
    outcomes.forEach((o, i) => {
      if (o.status !== 200 || !('svc' in o)) return;
      // Each success cost what the fake upstream reported for what it sent.
      assert.equal(o.svc.credits_used, creditsFor(1, countWords(o.content), clamped(i) ? FAST : SMART), JSON.stringify(o.svc));
      assert.equal(o.svc.routed_model, clamped(i) ? 'svc-fast-ok' : 'svc-smart-ok');
      spent += o.svc.credits_used;
    });
    const ok = successes(outcomes).length;
    assert.ok(ok >= 50 && ok <= 110, `${ok} succeeded`);

    const after = await credits(gw, account.key);
    assert.ok(after.earned_credits.balance >= 0 && after.purchased_credits.balance >= 0, JSON.stringify(after));
    assert.equal(after.reserved_credits, 0);
    assert.equal(start - after.total_credits, spent);
    assert.equal((await usageTotals(gw, account.key)).total_credits_spent, spent);
  });

  it('ledger verify (the CLI) is clean, and reports a balance tampered with', async () => {
    const clean = await ledgerVerifyCli(gw.databaseUrl);
    assert.equal(clean.code, 0, clean.stderr);
    const report = JSON.parse(clean.stdout) as { ok: boolean; accounts: number; disagreements: unknown[] };
    assert.deepEqual([report.ok, report.accounts, report.disagreements], [true, 2, []]);

    {
      const [grant] = await gw.rows<{ id: string; balance: number }>(`SELECT id, balance FROM grants WHERE kind = 'purchased' ORDER BY created_at LIMIT 1`);
      assert.ok(grant);
      await gw.exec('UPDATE grants SET balance = balance + 5 WHERE id = ?', grant.id);
      const tampered = await ledgerVerifyCli(gw.databaseUrl);
      assert.equal(tampered.code, 1, tampered.stderr);
      const bad = JSON.parse(tampered.stdout) as { ok: boolean; disagreements: Array<{ subject: string; field: string; stored: number; recomputed: number }> };
      assert.equal(bad.ok, false);
      assert.deepEqual(bad.disagreements.map((d) => [d.subject, d.field, d.stored, d.recomputed]),
        [[grant.id, 'balance', grant.balance + 5, grant.balance]]);
    }
  });
});

describe('concurrent requests against a key with a daily cap', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ upstreamUrl: upstream.url });
  });
  after(async () => {
    await gw.close();
  });

  it('never spend past the cap; the rest get 429', async () => {
    const account = await gw.createAccount({ purchased: 10_000, key: { dailyCreditLimit: 40 } });
    const client = gw.client(account.key);
    const outcomes = await Promise.all(Array.from({ length: 60 }, (_, i) => completionOutcome(client, smart(), i % 3 === 0)));
    assert.deepEqual(statusCounts(outcomes), { 200: 10, 429: 50 });
    assertRefusals(outcomes, 429, 'daily_credit_limit_exceeded');
    const spent = successes(outcomes).reduce((n, o) => n + o.svc.credits_used, 0);
    assert.equal(spent, 40);

    const keys = await getJson<{ data: Array<{ id: string; credits_spent_today: number; daily_credit_limit: number }> }>(gw, account.key, '/api-keys');
    const key = keys.data.find((k) => k.id === account.keyId)!;
    assert.deepEqual([key.credits_spent_today, key.daily_credit_limit], [40, 40]);
    const after = await credits(gw, account.key);
    assert.deepEqual([after.total_credits, after.reserved_credits], [10_000 - 40, 0]);
  });

  it('clamp to what the cap leaves when max_tokens is not given', async () => {
    const account = await gw.createAccount({ purchased: 10_000, key: { dailyCreditLimit: 30 } });
    const client = gw.client(account.key);
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, i) => completionOutcome(client, smart({ max_tokens: null }), i % 2 === 0)));
    assert.deepEqual(Object.keys(statusCounts(outcomes)).sort(), ['200', '429']);
    assertRefusals(outcomes, 429, 'daily_credit_limit_exceeded');
    const spent = successes(outcomes).reduce((n, o) => n + o.svc.credits_used, 0);
    const keys = await getJson<{ data: Array<{ id: string; credits_spent_today: number }> }>(gw, account.key, '/api-keys');
    const today = keys.data.find((k) => k.id === account.keyId)!.credits_spent_today;
    assert.ok(today <= 30, `spent ${today} today`);
    assert.equal(today, spent);
    assert.equal((await credits(gw, account.key)).total_credits, 10_000 - spent);
  });
});

describe('earned credits through HTTP', () => {
  let gw: TestGateway;
  let clock: TestClock;
  before(async () => {
    clock = new TestClock('2026-11-21T12:00:00Z');
    // The sweeper stays out of the way: moving the clock hours ahead would lapse an in-flight lease.
    gw = await startGateway({ clock, sweepEveryMs: 3_600_000, config: fakeUpstreamConfig(upstream.url, { 'svc-code': ['svc-code-slow-300'] }) });
  });
  after(async () => {
    await gw.close();
  });

  it('are spent before purchased, soonest expiry first, and are gone once expired', async () => {
    const account = await gw.createAccount({
      purchased: 100, earned: [{ amount: 20, expiresAt: '2026-11-23T00:00:00Z' }, { amount: 10, expiresAt: '2026-11-22T00:00:00Z' }],
    });
    const client = gw.client(account.key);
    assert.deepEqual(await credits(gw, account.key), {
      account_id: account.accountId, total_credits: 130, currency: 'SVC_CREDITS',
      earned_credits: { balance: 30, expires_at: '2026-11-22T00:00:00Z', days_remaining: 1 },
      purchased_credits: { balance: 100, expires_at: null }, reserved_credits: 0, available_credits: 130,
    });
    const first = await completionOutcome(client, smart(), false);
    assert.equal(first.status, 200);
    const one = await credits(gw, account.key);
    assert.deepEqual([one.earned_credits.balance, one.purchased_credits.balance], [26, 100]);

    clock.set('2026-11-22T00:00:00Z'); // the 10-credit grant, 6 left in it, expires
    const two = await credits(gw, account.key);
    assert.deepEqual(two.earned_credits, { balance: 20, expires_at: '2026-11-23T00:00:00Z', days_remaining: 1 });
    assert.deepEqual([two.total_credits, two.purchased_credits.balance], [120, 100]);

    for (let i = 0; i < 5; i++) assert.equal((await completionOutcome(client, smart(), i % 2 === 0)).status, 200);
    const three = await credits(gw, account.key);
    assert.deepEqual(three.earned_credits, { balance: 0, expires_at: null, days_remaining: 0 });
    assert.equal(three.purchased_credits.balance, 100);
    const last = await completionOutcome(client, smart(), false);
    assert.ok(last.status === 200 && 'svc' in last);
    assert.deepEqual([last.svc.credits_used, last.svc.balance_remaining], [4, 96]);
    assert.equal((await credits(gw, account.key)).purchased_credits.balance, 96);

    const expiries = await gw.rows(`SELECT amount FROM ledger WHERE account_id = ? AND entry = 'expire'`, account.accountId);
    assert.deepEqual(expiries, [{ amount: -6 }]);
    assert.equal((await ledgerVerifyCli(gw.databaseUrl)).code, 0);
  });

  it('held before expiry are settled from even when the request ends after it', async () => {
    const account = await gw.createAccount({ purchased: 100, earned: [{ amount: 10, expiresAt: '2026-11-22T01:00:00Z' }] });
    const client = gw.client(account.key);
    const cost = creditsFor(countWords('hi'), countWords(REPLY), CODE);
    assert.equal(cost, 2);
    const pending = completionOutcome(client, { ...smart(), model: 'svc-code' }, false); // upstream answers after 300 ms
    await waitFor(() => credits(gw, account.key), (c) => c.reserved_credits > 0, 'the hold');
    clock.set('2026-11-22T02:00:00Z');
    const outcome = await pending;
    assert.ok(outcome.status === 200 && 'svc' in outcome, JSON.stringify(outcome));
    assert.deepEqual([outcome.svc.credits_used, outcome.svc.balance_remaining], [cost, 100]);
    const after = await credits(gw, account.key);
    assert.deepEqual([after.earned_credits.balance, after.purchased_credits.balance, after.reserved_credits], [0, 100, 0]);
  });
});

describe('a streamed completion the client aborts midway', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startGateway({ config: fakeUpstreamConfig(upstream.url, { 'svc-smart': ['svc-smart-stall-4000'] }) });
  });
  after(async () => {
    await gw.close();
  });

  it('is charged for the prompt and the tokens delivered before the cut, and holds nothing after', async () => {
    const account = await gw.createAccount({ purchased: 1000 });
    const client = gw.client(account.key);
    const messages = [{ role: 'user' as const, content: 'Tell me, in forty plain words, something about incomprehensibilities.' }];
    const stream = await client.chat.completions.create({ model: 'svc-smart', messages, max_tokens: MAX_TOKENS, stream: true });
    let received = '';
    for await (const chunk of stream) {
      received += chunk.choices[0]?.delta.content ?? '';
      assert.equal(svcIfAny(chunk), undefined, 'no finish chunk before the cut');
      if (received !== '') {
        stream.controller.abort();
        break;
      }
    }
    assert.equal(received, 'one'); // the fake stalls after its first word
    const expected = creditsFor(countPromptTokens(messages), countTextTokens(received), SMART);
    const full = creditsFor(countPromptTokens(messages), MAX_TOKENS, SMART);
    assert.ok(expected < full);

    const after = await waitFor(() => credits(gw, account.key), (c) => c.reserved_credits === 0 && c.total_credits < 1000, 'the settlement');
    assert.equal(1000 - after.total_credits, expected);
    assert.equal(after.available_credits, after.total_credits);
    const usage = await getJson<{ total_requests: number; total_credits_spent: number; total_prompt_tokens: number; total_completion_tokens: number }>(
      gw, account.key, '/usage');
    assert.deepEqual(usage.total_requests, 1);
    assert.deepEqual([usage.total_prompt_tokens, usage.total_completion_tokens, usage.total_credits_spent],
      [countPromptTokens(messages), countTextTokens(received), expected]);
  });
});
