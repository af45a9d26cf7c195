/**
 * The simulator in CI: fixed seeds on each store, a crash run with a SIGKILLed
 * child, and proof that it can fail: a store that charges one credit more than
 * asked is caught and the failing sequence shrunk.
 *
 * Sizes: 2 seeds × 10,000 operations on each store (SQLite's file on tmpfs
 * where there is one). Every step is checked against the model and a
 * PostgreSQL step is several round trips: on this shared two-core machine,
 * with two long simulations running beside it, a SQLite seed took 8 s and a
 * PostgreSQL seed 51 s. `npm run sim` runs any size.
 */
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { SettleRequest, Store } from '../../src/store/types.js';
import { runFault } from '../../sim/fault.js';
import { generate } from '../../sim/ops.js';
import { runOps, type RunOptions } from '../../sim/runner.js';
import { shrink } from '../../sim/shrink.js';
import { forEachBackend, postgresServerUrl } from '../support/store-fixture.js';

const SIZES = { sqlite: { seeds: [1, 2], ops: 10_000 }, postgres: { seeds: [1, 2], ops: 10_000 } };

/** SQLite's file on tmpfs where there is one: the same database, without a disk's fsync on every commit. */
const SQLITE_DIR = existsSync('/dev/shm') ? '/dev/shm' : undefined;

function options(backend: 'sqlite' | 'postgres', extra: Partial<RunOptions> = {}): RunOptions {
  const url = postgresServerUrl();
  return {
    backend, instances: 3, verifyEvery: 500, checkEvery: 100,
    ...(url && { postgresUrl: url }), ...(SQLITE_DIR && { sqliteDir: SQLITE_DIR }), ...extra,
  };
}

forEachBackend('ledger simulation', (backend) => {
  for (const seed of SIZES[backend].seeds) {
    it(`seed ${seed}: ${SIZES[backend].ops} operations, no invariant broken`, async () => {
      const report = await runOps(generate(seed, SIZES[backend].ops, 3), options(backend));
      assert.equal(report.violation, null, JSON.stringify(report.violation));
      assert.equal(report.steps, SIZES[backend].ops);
      // The mix reached what it is for: holds taken and refused, settles short, lapses swept, claims replayed.
      for (const seen of [
        'reserve: taken', 'reserve: insufficient_credits', 'reserve: daily_cap', 'reserve: rate_limit', 'settle: short', 'claim: mismatch',
      ]) {
        assert.ok((report.outcomes[seen] ?? 0) > 0, `no "${seen}" in ${JSON.stringify(report.outcomes)}`);
      }
    });
  }

  it('a child killed with SIGKILL mid-stream loses no answered settle and leaves nothing partial', async () => {
    for (const seed of [11, 12]) {
      const report = await runFault(seed, backend, postgresServerUrl());
      assert.equal(report.violation, null, JSON.stringify(report.violation));
    }
  });
});

describe('the operation generator', () => {
  it('keeps at most 8 unrevoked keys per account over a long run, still making keys and revoking them', () => {
    const live = new Map<string, Set<string>>();
    let made = 0;
    let revoked = 0;
    const owner = new Map<string, string>();
    for (const op of generate(20261125, 200_000, 3)) {
      if (op.t === 'key') {
        made++;
        owner.set(op.k, op.a);
        const keys = live.get(op.a) ?? new Set<string>();
        keys.add(op.k);
        live.set(op.a, keys);
        assert.ok(keys.size <= 8, `account ${op.a} has ${keys.size} unrevoked keys`);
      } else if (op.t === 'revoke') {
        if (live.get(owner.get(op.k) ?? '')?.delete(op.k)) revoked++;
      }
    }
    assert.ok(made > 100 && revoked > 100, `${made} keys made, ${revoked} revoked`);
  });
});

/** A store that behaves as `store` but for `method`, which `replace` stands in for. */
function broken<K extends 'settle' | 'release'>(method: K, replace: (store: Store) => Store[K]): (store: Store) => Store {
  return (store) => new Proxy(store, {
    get(target, prop) {
      if (prop === method) return replace(target);
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('the simulator can fail', () => {
  const cases = [
    { name: 'charges one credit more than asked', wrap: broken('settle', (s) => (request: SettleRequest) => s.settle({ ...request, credits: request.credits + 1 })) },
    { name: 'skips a release', wrap: broken('release', () => async () => {}) },
  ];
  for (const { name, wrap } of cases) {
    it(`catches a store that ${name}, and shrinks the sequence`, async () => {
      const run = options('sqlite', { wrap });
      const ops = generate(5, 400, 3);
      const report = await runOps(ops, run);
      assert.ok(report.violation, 'the broken store went unnoticed');
      const shrunk = await shrink(ops, report.violation, run, 20_000);
      assert.equal(shrunk.violation.invariant, report.violation.invariant);
      assert.ok(shrunk.ops.length < report.violation.step + 1, `${shrunk.ops.length} ops, from ${report.violation.step + 1}`);
      const replay = await runOps(shrunk.ops, run);
      assert.equal(replay.violation?.invariant, report.violation.invariant, 'the shrunk sequence reproduces it');
    });
  }
});
