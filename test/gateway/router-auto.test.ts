/**
 * svc-auto in the router: the classifier's class picks the alias, `auto.when_unsure` from
 * the config decides between the two likeliest classes when the model is unsure, and
 * svc.auto carries the class, the alias, the reasons and the probabilities.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { systemClock } from '../../src/clock.js';
import { loadConfig, parseConfig, DEFAULT_CONFIG_SOURCE } from '../../src/config.js';
import { defaultClassifier, PromptClassifier } from '../../src/gateway/auto/classifier.js';
import { Breaker } from '../../src/gateway/breaker.js';
import { Catalog } from '../../src/gateway/catalog.js';
import { Router } from '../../src/gateway/router.js';
import { createSimulatorAdapter } from '../../src/providers/simulator.js';
import type { ChatMessage } from '../../src/providers/types.js';

const ALIASES = { simple: 'svc-fast', code: 'svc-code', complex: 'svc-smart' } as const;

function routerFor(whenUnsure: 'capable' | 'cheap', classifier = defaultClassifier()): { router: Router; catalog: Catalog } {
  const config = parseConfig({ ...DEFAULT_CONFIG_SOURCE, auto: { when_unsure: whenUnsure } });
  const catalog = new Catalog(config);
  const providers = new Map([['simulator', createSimulatorAdapter()]]);
  const router = new Router(catalog, providers, new Breaker(5, 30_000, systemClock), classifier, config.auto.when_unsure);
  return { router, catalog };
}

const messages: ChatMessage[] = [{ role: 'user', content: 'Write a Dockerfile for a Go service with a multi-stage build.' }];

describe('Router: svc-auto', () => {
  it('routes to the alias of the predicted class and says why', () => {
    const { router, catalog } = routerFor(loadConfig(undefined).auto.when_unsure);
    const plan = router.plan(catalog.get('svc-auto')!, messages, 100);
    assert.equal(plan.auto?.class, 'code');
    assert.equal(plan.auto?.alias, 'svc-code');
    assert.deepEqual(plan.candidates.map((c) => c.upstream), ['simulator/sim-code-1']);
    assert.ok(plan.auto.reasons.some((r) => r.includes('dockerfile')), plan.auto.reasons.join(' | '));
    const { simple, code, complex } = plan.auto.probabilities;
    assert.ok(code > simple && code > complex);
  });

  it('takes when_unsure from the config: capable the dearer, cheap the cheaper of the two likeliest', () => {
    const unsure = new PromptClassifier({ ...defaultClassifier().model, margin: 1 });
    const order = ['simple', 'code', 'complex'] as const;
    const result = unsure.classify(messages);
    const [low, high] = [result.predicted, result.runnerUp].sort((a, b) => order.indexOf(a) - order.indexOf(b));
    for (const [policy, expected] of [['capable', high], ['cheap', low]] as const) {
      const { router, catalog } = routerFor(policy, unsure);
      const plan = router.plan(catalog.get('svc-auto')!, messages, 100);
      assert.equal(plan.auto?.class, expected, policy);
      assert.equal(plan.auto?.alias, ALIASES[expected!]);
      assert.match(plan.auto?.reasons.at(-1) ?? '', new RegExp(`when_unsure ${policy} → ${expected}`));
    }
  });
});
