/**
 * `npm run sim -- --seed N --ops M --store sqlite|postgres [--instances K]
 * [--verify-every N] [--check-every N] [--shrink-seconds S] [--crashes C] [--dir D]`, or
 * `npm run sim -- --replay FILE [--store …]`. PostgreSQL is taken from
 * DATABASE_URL. Exit code 0 only when no invariant broke; on a violation the
 * shortest reproducing sequence found is printed and written as JSON that
 * `--replay` takes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { runFault } from './fault.js';
import { generate, type Op } from './ops.js';
import { runOps, type RunOptions, type RunReport } from './runner.js';
import { shrink } from './shrink.js';
import type { Backend } from './target.js';

interface Replay {
  seed: number | null;
  store: Backend;
  instances: number;
  invariant: string;
  ops: Op[];
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string', default: '1' },
      ops: { type: 'string', default: '10000' },
      store: { type: 'string' },
      instances: { type: 'string', default: '3' },
      'verify-every': { type: 'string', default: '1000' },
      'check-every': { type: 'string', default: '100' },
      'shrink-seconds': { type: 'string', default: '120' },
      replay: { type: 'string' },
      crashes: { type: 'string', default: '0' },
      dir: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const replay = values.replay ? JSON.parse(readFileSync(values.replay, 'utf8')) as Replay : null;
  const store = (values.store ?? replay?.store ?? 'sqlite') as Backend;
  if (store !== 'sqlite' && store !== 'postgres') throw new Error(`--store must be sqlite or postgres, not ${store}`);
  const instances = replay?.instances ?? Number(values.instances);
  const seed = replay ? replay.seed : Number(values.seed);
  const options: RunOptions = {
    backend: store,
    instances,
    verifyEvery: Number(values['verify-every']),
    checkEvery: Number(values['check-every']),
    ...(process.env.DATABASE_URL && { postgresUrl: process.env.DATABASE_URL }),
    ...(values.dir && { sqliteDir: values.dir }),
    onProgress: (steps, ms) => console.log(`  ${steps} steps, ${(steps / (ms / 1000)).toFixed(0)} ops/s`),
  };
  const ops = replay ? replay.ops : generate(seed!, Number(values.ops), instances);
  console.log(`sim: ${replay ? `replaying ${values.replay}` : `seed ${seed}`}, ${ops.length} ops, ${store}, ${instances} instances`);
  for (let n = 0; n < Number(values.crashes); n++) {
    const crash = await runFault(seed! + n, store, options.postgresUrl);
    console.log(`crash ${seed! + n}: child killed after ${crash.answered} answered settles; ` +
      `${crash.violation ? `VIOLATION ${crash.violation.invariant}: ${crash.violation.detail}` : 'no violations'}`);
    if (crash.violation) return 1;
  }
  const report = await runOps(ops, options);
  printReport(report);
  if (!report.violation) return 0;

  const v = report.violation;
  console.log(`\nVIOLATION at step ${v.step} (seed ${seed ?? 'replay'}): ${v.invariant}\n  ${v.detail}\n  op: ${JSON.stringify(ops[v.step])}`);
  console.log(`shrinking (at most ${values['shrink-seconds']} s)…`);
  const shrunk = await shrink(ops, v, options, Number(values['shrink-seconds']) * 1000);
  const file = values.out ?? `sim-failure-${store}-${seed ?? 'replay'}.json`;
  const out: Replay = { seed, store, instances, invariant: shrunk.violation.invariant, ops: shrunk.ops };
  writeFileSync(file, `${JSON.stringify(out, null, 1)}\n`);
  console.log(`shortest sequence found (${shrunk.ops.length} ops, ${shrunk.replays} replays), step ${shrunk.violation.step}: ` +
    `${shrunk.violation.invariant}\n  ${shrunk.violation.detail}`);
  if (shrunk.ops.length <= 100) console.log(JSON.stringify(out));
  console.log(`written to ${file}; replay with: npm run sim -- --replay ${file}`);
  return 1;
}

function printReport(report: RunReport): void {
  const seconds = report.elapsedMs / 1000;
  console.log(`${report.steps} steps in ${seconds.toFixed(1)} s: ${(report.steps / seconds).toFixed(0)} ops/s; ` +
    `${report.violation ? '1 violation' : 'no violations'}`);
  const counts = Object.entries(report.counts).sort(([, a], [, b]) => b - a);
  console.log(`operations: ${counts.map(([name, n]) => `${name} ${n}`).join(', ')}`);
  console.log(`answers: ${Object.entries(report.outcomes).sort().map(([name, n]) => `${name} ${n}`).join(', ')}`);
}

const USAGE = `usage: npm run sim -- --seed N --ops M --store sqlite|postgres [--instances K] [--verify-every N]
         [--check-every N] [--shrink-seconds S] [--crashes C] [--dir D] [--out FILE]
       npm run sim -- --replay FILE [--store sqlite|postgres]
PostgreSQL is taken from DATABASE_URL. Exit code 0: no invariant broke; 1: one did; 2: bad usage or a failure.`;

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(USAGE);
} else {
  main().then((code) => { process.exitCode = code; }, (err: unknown) => {
    const usage = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') || /^--\S+ must/.test((err as Error).message);
    console.error(usage ? `sim: ${(err as Error).message}\n${USAGE}` : err);
    process.exitCode = 2;
  });
}
