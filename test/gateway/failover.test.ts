import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../src/clock.js';
import { GatewayError } from '../../src/errors.js';
import { Breaker } from '../../src/gateway/breaker.js';
import { openStreamWithFailover } from '../../src/gateway/failover.js';
import type { Candidate } from '../../src/gateway/router.js';
import type { AttemptContext, ProviderAdapter, UpstreamCompletion, UpstreamEvent } from '../../src/providers/types.js';
import { DEFAULT_ROUTE_PARAMS, UpstreamError } from '../../src/providers/types.js';

/** An in-process adapter: answers after `delayMs`, or fails as told; records what happened to it. */
function scripted(id: string, script: { delayMs?: number; fail?: UpstreamError }) {
  const log = { calls: 0, aborted: false };
  const wait = async (ctx: AttemptContext) => {
    log.calls += 1;
    ctx.signal.addEventListener('abort', () => { log.aborted = true; });
    if (script.delayMs) {
      await sleep(script.delayMs, undefined, { signal: ctx.signal }).catch(() => {
        throw new UpstreamError('aborted', 'aborted');
      });
    }
    if (script.fail) throw script.fail;
  };
  const adapter: ProviderAdapter = {
    id,
    unsupported: () => null,
    continues: () => false,
    async complete(_request, ctx): Promise<UpstreamCompletion> {
      await wait(ctx);
      ctx.onFirstByte();
      return { content: `from ${id}`, finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 2 } };
    },
    async *stream(_request, ctx): AsyncGenerator<UpstreamEvent> {
      await wait(ctx);
      yield { type: 'delta', content: `from ${id}` };
      yield { type: 'finish', finishReason: 'stop' };
    },
  };
  const candidate: Candidate = { upstream: `${id}/m`, provider: adapter, model: 'm', params: DEFAULT_ROUTE_PARAMS };
  return { candidate, log };
}

/** Opens the first stream that answers, and lets it go: what these tests look at is who served. */
async function open(...args: Parameters<typeof openStreamWithFailover>) {
  const served = await openStreamWithFailover(...args);
  served.result.cancel();
  return served;
}

const request = {
  messages: [{ role: 'user' as const, content: 'hi' }], maxTokens: 10, temperature: 0.7, topP: 1, callerSet: { temperature: false, topP: false },
};

function options(extra: { hedgeAfterMs?: number; firstByteTimeoutMs?: number; signal?: AbortSignal } = {}) {
  return {
    signal: extra.signal ?? new AbortController().signal,
    firstByteTimeoutMs: extra.firstByteTimeoutMs ?? 2000,
    hedgeAfterMs: extra.hedgeAfterMs,
    breaker: new Breaker(2, 60_000, systemClock),
  };
}

describe('failover', () => {
  it('walks down the list when a route fails, and records the failure', async () => {
    const a = scripted('a', { fail: new UpstreamError('status', 'HTTP 500', { status: 500 }) });
    const b = scripted('b', {});
    const opts = options();
    const served = await open([a.candidate, b.candidate], request, opts);
    assert.equal(served.candidate.upstream, 'b/m');
    assert.deepEqual(served.result.first, [{ type: 'delta', content: 'from b' }]);
    assert.deepEqual(opts.breaker.view(['a/m'])[0]!.failures, 1);
  });

  it('never holds a request the gateway could not build against the upstream, and says so when no route could take it', async () => {
    const unbuildable = () => new UpstreamError('request', 'the request could not be written as JSON');
    const a = scripted('a', { fail: unbuildable() });
    const b = scripted('b', { fail: unbuildable() });
    const opts = options();
    for (let i = 0; i < 3; i++) {
      await assert.rejects(open([a.candidate, b.candidate], request, opts), (err: unknown) => {
        assert.ok(err instanceof GatewayError);
        assert.deepEqual([err.status, err.code], [400, 'invalid_value']);
        return true;
      });
    }
    assert.deepEqual(opts.breaker.view(['a/m', 'b/m']).map((v) => [v.failures, v.state]), [[0, 'closed'], [0, 'closed']]);
  });

  it('does not hold a refusal of the request (HTTP 400) against the upstream\'s health', async () => {
    const refusing = scripted('r', { fail: new UpstreamError('status', 'HTTP 400', { status: 400 }) });
    const broken = scripted('k', { fail: new UpstreamError('status', 'HTTP 401', { status: 401 }) });
    const ok = scripted('ok', {});
    const opts = options();
    for (let i = 0; i < 3; i++) await open([refusing.candidate, broken.candidate, ok.candidate], request, opts);
    const [r, k] = opts.breaker.view(['r/m', 'k/m']);
    assert.deepEqual([r!.failures, r!.state], [0, 'closed']);
    assert.deepEqual([k!.failures, k!.state], [3, 'open']);
  });

  it('answers 502 naming every upstream when all fail, 504 when all time out', async () => {
    const a = scripted('a', { fail: new UpstreamError('connection', 'reset') });
    const b = scripted('b', { fail: new UpstreamError('status', 'HTTP 429', { status: 429 }) });
    await assert.rejects(open([a.candidate, b.candidate], request, options()), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.status, 502);
      assert.equal(err.code, 'upstream_unavailable');
      // The caller reads the gateway's own words; which upstream did what is kept for the log.
      assert.equal(err.message, 'Every upstream failed.');
      assert.ok(err.cause instanceof Error);
      assert.match(err.cause.message, /a\/m: connection failed \(reset\); b\/m: answered HTTP 429 \(HTTP 429\)/);
      return true;
    });
    const slow1 = scripted('s1', { delayMs: 1000 });
    const slow2 = scripted('s2', { delayMs: 1000 });
    await assert.rejects(open([slow1.candidate, slow2.candidate], request, options({ firstByteTimeoutMs: 50 })), (err: unknown) => {
      assert.ok(err instanceof GatewayError);
      assert.equal(err.status, 504);
      assert.equal(err.code, 'upstream_timeout');
      return true;
    });
    assert.equal(slow1.log.aborted, true);
  });

  it('without hedging, a slow route within the timeout serves and the next is never called', async () => {
    const a = scripted('a', { delayMs: 80 });
    const b = scripted('b', {});
    const served = await open([a.candidate, b.candidate], request, options());
    assert.equal(served.candidate.upstream, 'a/m');
    assert.equal(b.log.calls, 0);
  });

  it('hedges: a silent first route gets a second alongside, the faster wins and the other is aborted', async () => {
    const a = scripted('a', { delayMs: 1000 });
    const b = scripted('b', { delayMs: 10 });
    const served = await open([a.candidate, b.candidate], request, options({ hedgeAfterMs: 30 }));
    assert.equal(served.candidate.upstream, 'b/m');
    assert.equal(a.log.aborted, true);
  });

  it('hedges streams too, and a first route that answers before the hedge fires is the only one called', async () => {
    const a = scripted('a', { delayMs: 1000 });
    const b = scripted('b', {});
    const served = await openStreamWithFailover([a.candidate, b.candidate], request, options({ hedgeAfterMs: 30 }));
    assert.equal(served.candidate.upstream, 'b/m');
    assert.deepEqual(served.result.first, [{ type: 'delta', content: 'from b' }]);
    served.result.cancel();

    const fast = scripted('fast', {});
    const spare = scripted('spare', {});
    const first = await open([fast.candidate, spare.candidate], request, options({ hedgeAfterMs: 200 }));
    assert.equal(first.candidate.upstream, 'fast/m');
    await sleep(250);
    assert.equal(spare.log.calls, 0);
  });

  it('stops at once when the client goes away', async () => {
    const controller = new AbortController();
    const a = scripted('a', { delayMs: 1000 });
    const b = scripted('b', {});
    const pending = open([a.candidate, b.candidate], request, options({ signal: controller.signal }));
    setTimeout(() => controller.abort(), 20);
    await assert.rejects(pending, (err: unknown) => err instanceof UpstreamError && err.failure === 'aborted');
    assert.equal(b.log.calls, 0);
  });
});
