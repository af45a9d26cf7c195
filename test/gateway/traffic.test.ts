/** The in-memory windows behind the operator's dashboard: attempts per upstream, requests per minute per alias. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AliasTraffic, UpstreamStats } from '../../src/gateway/traffic.js';
import { TestClock } from '../support/gateway.js';

describe('UpstreamStats', () => {
  it('keeps the last N attempts, gives the error rate and nearest-rank percentiles', () => {
    const clock = new TestClock('2026-11-21T12:00:00Z');
    const stats = new UpstreamStats(clock, 10, 60_000);
    assert.deepEqual(stats.view('a'), { recent_attempts: 0, recent_failures: 0, recent_error_rate: null, latency_p50_ms: null, latency_p95_ms: null });
    // 5 failures at 1000 ms, pushed out by 10 successes at 1..10 ms.
    for (let i = 0; i < 5; i++) stats.record('a', false, 1000);
    for (let i = 1; i <= 10; i++) stats.record('a', true, i);
    assert.deepEqual(stats.view('a'), { recent_attempts: 10, recent_failures: 0, recent_error_rate: 0, latency_p50_ms: 5, latency_p95_ms: 10 });
    stats.record('a', false, 20.6);
    stats.record('a', false, 30);
    const view = stats.view('a');
    assert.deepEqual([view.recent_attempts, view.recent_failures, view.recent_error_rate, view.latency_p95_ms], [10, 2, 0.2, 30]);
    assert.equal(stats.view('b').recent_attempts, 0, 'per upstream');
  });

  it('forgets attempts older than its window', () => {
    const clock = new TestClock('2026-11-21T12:00:00Z');
    const stats = new UpstreamStats(clock, 100, 60_000);
    stats.record('a', false, 5);
    clock.advance(30_000);
    stats.record('a', true, 7);
    clock.advance(30_001);
    assert.deepEqual([stats.view('a').recent_attempts, stats.view('a').recent_error_rate, stats.view('a').latency_p50_ms], [1, 0, 7]);
  });
});

describe('AliasTraffic', () => {
  it('counts per minute over the window, oldest first, reusing a minute\'s slot an hour later', () => {
    const clock = new TestClock('2026-11-21T12:00:30Z');
    const traffic = new AliasTraffic(clock, 3);
    assert.deepEqual(traffic.view(), { object: 'traffic', start: '2026-11-21T11:58:00Z', minutes: 3, by_alias: {} });
    traffic.record('svc-fast');
    traffic.record('svc-fast');
    clock.advance(1_000);
    traffic.record('svc-code');
    assert.deepEqual(traffic.view().by_alias, { 'svc-code': [0, 0, 1], 'svc-fast': [0, 0, 2] });
    clock.advance(3 * 60_000);
    traffic.record('svc-fast');
    assert.deepEqual(traffic.view().by_alias, { 'svc-code': [0, 0, 0], 'svc-fast': [0, 0, 1] });
    assert.equal(traffic.view().start, '2026-11-21T12:01:00Z');
  });
});
