/**
 * Delta debugging over a failing operation list: replays ever smaller subsets,
 * each on a fresh database, keeping any that still break the same invariant,
 * until no chunk (down to single operations) can go or the time is up.
 */
import type { Violation } from './check.js';
import type { Op } from './ops.js';
import { runOps, type RunOptions } from './runner.js';

export interface Shrunk {
  ops: Op[];
  violation: Violation;
  replays: number;
}

export async function shrink(ops: Op[], violation: Violation, options: RunOptions, budgetMs: number): Promise<Shrunk> {
  const deadline = Date.now() + budgetMs;
  let current = ops.slice(0, violation.step + 1);
  let last = violation;
  let replays = 0;
  const stillFails = async (candidate: Op[]): Promise<boolean> => {
    replays++;
    const report = await runOps(candidate, options);
    if (report.violation === null || report.violation.invariant !== violation.invariant) return false;
    // Whatever followed the failing step is not needed.
    current = candidate.slice(0, report.violation.step + 1);
    last = report.violation;
    return true;
  };
  let n = 2;
  while (current.length >= 2 && Date.now() < deadline) {
    const size = Math.ceil(current.length / n);
    let reduced = false;
    for (let i = 0; i * size < current.length && Date.now() < deadline; i++) {
      const complement = [...current.slice(0, i * size), ...current.slice((i + 1) * size)];
      if (complement.length > 0 && await stillFails(complement)) {
        n = Math.max(n - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (size === 1) break;
      n = Math.min(current.length, n * 2);
    }
  }
  return { ops: current, violation: last, replays };
}
