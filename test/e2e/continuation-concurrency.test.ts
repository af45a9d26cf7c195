/**
 * Continued answers under concurrency: many streams at once whose first route
 * dies midway and a second continues them, on an account that affords only
 * some. No overdraft, every charge is what its client received, and the
 * ledger agrees.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { creditsFor } from '../../src/metering/pricing.js';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';
import { completionOutcome, credits, ledgerVerifyCli, statusCounts, successes } from '../support/e2e-helpers.js';
import { useGatewayWithUpstream } from '../support/gateway.js';

const REPLY = 'one two three four five six seven eight';
const PRICE = { input_credits_per_1k: 400, output_credits_per_1k: 1200 };
const MESSAGES = [{ role: 'user' as const, content: 'count for me' }];

describe('continued answers, many at once', { timeout: 60_000 }, () => {
  const env = useGatewayWithUpstream((url) => ({
    providers: [{ id: 'fake', type: 'openai', base_url: url }],
    models: [{
      id: 'continued', name: 'continued', description: 'continued', context_window: 64_000, pricing: PRICE,
      routes: [{ provider: 'fake', model: 'first-cut' }, { provider: 'fake', model: 'second-ok', continue: true }],
    }],
    routing: { first_byte_timeout_ms: 20_000 },
  }), { reply: REPLY });

  it('never overdraws, and charges each stream what its client received', async () => {
    const { gw } = env;
    const owed = creditsFor(countPromptTokens(MESSAGES), countTextTokens(REPLY), PRICE);
    const reserved = creditsFor(countPromptTokens(MESSAGES), 20, PRICE);
    const start = reserved * 12 + 5; // room for about a dozen holds at once, more as they settle
    const account = await gw.createAccount({ purchased: start });
    const client = gw.client(account.key);
    const outcomes = await Promise.all(Array.from({ length: 60 }, () =>
      completionOutcome(client, { model: 'continued', messages: MESSAGES, max_tokens: 20 }, true)));

    const counts = statusCounts(outcomes);
    assert.deepEqual(Object.keys(counts).sort(), ['200', '402'], JSON.stringify(counts));
    const ok = successes(outcomes);
    for (const o of ok) {
      assert.equal(o.content, REPLY, 'each client saw one whole answer');
      assert.equal(o.svc.credits_used, owed);
      assert.equal(o.svc.routes?.length, 2);
    }
    const after = await credits(gw, account.key);
    assert.equal(after.reserved_credits, 0);
    assert.ok(after.total_credits >= 0);
    assert.equal(start - after.total_credits, ok.length * owed, 'the balance dropped by exactly what was charged');
    assert.equal((await ledgerVerifyCli(gw.databaseUrl)).code, 0);
  });
});
