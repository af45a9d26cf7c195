import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { Pricing } from '../../src/config.js';
import { affordableOutputTokens, creditsFor, DEFAULT_MAX_OUTPUT, planReservation } from '../../src/metering/pricing.js';
import type { Funds, ReservationDecision } from '../../src/store/types.js';

const AUTO: Pricing = { input_credits_per_1k: 10, output_credits_per_1k: 30 };
const FAST: Pricing = { input_credits_per_1k: 4, output_credits_per_1k: 12 };
const FREE: Pricing = { input_credits_per_1k: 0, output_credits_per_1k: 0 };

function plan(promptTokens: number, maxTokens: number | null, funds: Funds, contextWindow = 64_000, pricing = FAST): ReservationDecision {
  return planReservation({ promptTokens, maxTokens, contextWindow, pricing })(funds);
}

function refusal(decision: ReservationDecision): { reason: string; message: string } {
  assert.equal(decision.ok, false, `expected a refusal, got ${JSON.stringify(decision)}`);
  if (decision.ok) throw new Error('unreachable');
  return decision;
}

describe('creditsFor', () => {
  it('rounds any fraction of a credit up', () => {
    assert.equal(creditsFor(1, 0, AUTO), 1); // 10/1000
    assert.equal(creditsFor(101, 0, AUTO), 2); // 1010/1000
    assert.equal(creditsFor(0, 1, AUTO), 1); // 30/1000
    assert.equal(creditsFor(100, 101, AUTO), 5); // (1000 + 3030)/1000
    assert.equal(creditsFor(500, 666, FAST), 10); // (2000 + 7992)/1000
  });

  it('is exact on whole multiples of 1,000', () => {
    assert.equal(creditsFor(100, 0, AUTO), 1);
    assert.equal(creditsFor(100, 100, AUTO), 4); // (1000 + 3000)/1000
    assert.equal(creditsFor(1000, 1000, FAST), 16);
    assert.equal(creditsFor(250, 1000, FAST), 13); // (1000 + 12000)/1000
  });

  it('is zero for no tokens, or a free model', () => {
    assert.equal(creditsFor(0, 0, AUTO), 0);
    assert.equal(creditsFor(123_456, 7_890, FREE), 0);
  });
});

describe('affordableOutputTokens', () => {
  it('is the most output tokens the budget pays for after the prompt', () => {
    assert.equal(affordableOutputTokens(4, 100, AUTO), 100); // 4000 - 1000 = 3000 → 100 × 30
    assert.equal(affordableOutputTokens(4, 101, AUTO), 99); // 2990 / 30 = 99.67
    assert.equal(affordableOutputTokens(20, 500, FAST), 1500);
  });

  it('agrees with creditsFor at the edge: one token more would not fit', () => {
    for (const [budget, prompt, pricing] of [[4, 101, AUTO], [13, 500, FAST], [7, 333, AUTO], [1, 0, FAST]] as const) {
      const n = affordableOutputTokens(budget, prompt, pricing);
      assert.ok(creditsFor(prompt, n, pricing) <= budget, `${n} tokens fit in ${budget}`);
      assert.ok(creditsFor(prompt, n + 1, pricing) > budget, `${n + 1} tokens do not fit in ${budget}`);
    }
  });

  it('is 0 when the budget pays exactly the prompt, -1 when not even that', () => {
    assert.equal(affordableOutputTokens(1, 100, AUTO), 0);
    assert.equal(affordableOutputTokens(0, 0, AUTO), 0);
    assert.equal(affordableOutputTokens(0, 1, AUTO), -1);
    assert.equal(affordableOutputTokens(1, 101, AUTO), -1);
  });

  it('is unbounded when output is free', () => {
    assert.equal(affordableOutputTokens(0, 0, FREE), Number.MAX_SAFE_INTEGER);
  });
});

describe('planReservation with an explicit max_tokens', () => {
  // 500 prompt tokens at 4/1k = 2,000 millicredits; 1,000 output tokens at 12/1k = 12,000.
  it('reserves it whole', () => {
    assert.deepEqual(plan(500, 1000, { available: 14, capRemaining: null }), { ok: true, amount: 14, maxOutput: 1000 });
    assert.deepEqual(plan(500, 1000, { available: 14, capRemaining: 14 }), { ok: true, amount: 14, maxOutput: 1000 });
  });

  it('is not clamped to 4096, the credits or the cap when they cover it', () => {
    assert.deepEqual(plan(500, 10_000, { available: 1000, capRemaining: 500 }), { ok: true, amount: 122, maxOutput: 10_000 });
  });

  it('is refused with 402 when the credits cannot cover it', () => {
    const r = refusal(plan(500, 1000, { available: 13, capRemaining: null }));
    assert.equal(r.reason, 'insufficient_credits');
  });

  it('names the affordable number of output tokens in the 402 message', () => {
    // (13,000 - 2,000) / 12 = 916.67 → 916.
    const r = refusal(plan(500, 1000, { available: 13, capRemaining: 100 }));
    assert.equal(r.reason, 'insufficient_credits');
    assert.match(r.message, /\b916\b/);
    assert.ok(creditsFor(500, 916, FAST) <= 13 && creditsFor(500, 917, FAST) > 13);
  });

  it('says 0 affordable tokens when not even the prompt is covered', () => {
    const r = refusal(plan(500, 10, { available: 1, capRemaining: null }));
    assert.equal(r.reason, 'insufficient_credits');
    assert.match(r.message, /at most 0\b/);
  });

  it('is refused with 429 when it would pass the daily cap', () => {
    const r = refusal(plan(500, 1000, { available: 1000, capRemaining: 13 }));
    assert.equal(r.reason, 'daily_cap');
  });

  it('checks the cap before the credits', () => {
    assert.equal(refusal(plan(500, 1000, { available: 13, capRemaining: 13 })).reason, 'daily_cap');
    assert.equal(refusal(plan(500, 1000, { available: 0, capRemaining: 0 })).reason, 'daily_cap');
  });
});

describe('planReservation without max_tokens: the clamp', () => {
  it('binds at 4096 when everything else is plentiful', () => {
    assert.equal(DEFAULT_MAX_OUTPUT, 4096);
    // (2,000 + 4,096 × 12) / 1000 = 51.152 → 52.
    assert.deepEqual(plan(500, null, { available: 1_000_000, capRemaining: null }), { ok: true, amount: 52, maxOutput: 4096 });
    assert.deepEqual(plan(500, null, { available: 1_000_000, capRemaining: 1_000_000 }), { ok: true, amount: 52, maxOutput: 4096 });
  });

  it('binds at the context left after the prompt', () => {
    assert.deepEqual(plan(500, null, { available: 1_000_000, capRemaining: null }, 3000), { ok: true, amount: 32, maxOutput: 2500 });
    assert.deepEqual(plan(500, null, { available: 1_000_000, capRemaining: null }, 501), { ok: true, amount: 3, maxOutput: 1 });
  });

  it('binds at what the available credits afford', () => {
    // (20,000 - 2,000) / 12 = 1,500.
    assert.deepEqual(plan(500, null, { available: 20, capRemaining: null }), { ok: true, amount: 20, maxOutput: 1500 });
    // (3,000 - 2,000) / 12 = 83.3 → 83, costing 2,996 → 3.
    assert.deepEqual(plan(500, null, { available: 3, capRemaining: 50 }), { ok: true, amount: 3, maxOutput: 83 });
  });

  it('binds at what the key\'s remaining cap affords', () => {
    // (10,000 - 2,000) / 12 = 666.7 → 666, costing 9,992 → 10.
    assert.deepEqual(plan(500, null, { available: 1000, capRemaining: 10 }), { ok: true, amount: 10, maxOutput: 666 });
    // Cap (1,083 tokens) tighter than the credits (1,500).
    assert.deepEqual(plan(500, null, { available: 20, capRemaining: 15 }), { ok: true, amount: 15, maxOutput: 1083 });
  });

  it('never reserves more than the credits or the cap', () => {
    for (const available of [4, 7, 19, 52, 53, 400]) {
      for (const capRemaining of [null, 4, 11, 60]) {
        const d = plan(777, null, { available, capRemaining });
        assert.ok(d.ok);
        assert.ok(d.amount <= available && (capRemaining === null || d.amount <= capRemaining), JSON.stringify({ available, capRemaining, d }));
        assert.equal(d.amount, creditsFor(777, d.maxOutput, FAST));
      }
    }
  });

  it('refuses with 402 when the credits pay the prompt but not one output token', () => {
    // 2 credits pay exactly the 500-token prompt, leaving nothing for output.
    assert.equal(refusal(plan(500, null, { available: 2, capRemaining: null })).reason, 'insufficient_credits');
    assert.equal(refusal(plan(500, null, { available: 1, capRemaining: 100 })).reason, 'insufficient_credits');
    assert.equal(refusal(plan(500, null, { available: 0, capRemaining: null })).reason, 'insufficient_credits');
  });

  it('refuses with 429 when the cap leaves not even the prompt plus one token, before looking at credits', () => {
    assert.equal(refusal(plan(500, null, { available: 1000, capRemaining: 2 })).reason, 'daily_cap');
    assert.equal(refusal(plan(500, null, { available: 0, capRemaining: 2 })).reason, 'daily_cap');
    assert.equal(refusal(plan(500, null, { available: 0, capRemaining: 0 })).reason, 'daily_cap');
  });

  it('takes one token when exactly one is affordable', () => {
    // Prompt 100 at 10/1k = 1,000; one output token at 30/1k makes 1,030 → 2 credits.
    assert.deepEqual(plan(100, null, { available: 2, capRemaining: null }, 128_000, AUTO), { ok: true, amount: 2, maxOutput: 33 });
    assert.deepEqual(plan(997, null, { available: 10, capRemaining: null }, 128_000, AUTO), { ok: true, amount: 10, maxOutput: 1 });
  });
});
