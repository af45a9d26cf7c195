/**
 * `serve --workers N`: N processes serving one port (node:cluster), each with
 * its own connection to the one database. Several processes on one SQLite file
 * are serialised by its write lock (`BEGIN IMMEDIATE`); on PostgreSQL they are
 * several instances of one ledger. The primary only supervises: a worker that
 * dies is replaced (its holds lapse and any sweeper releases or settles them);
 * SIGINT/SIGTERM stop every worker gracefully.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';

/** A crash loop is not supervised forever: after this many early deaths the primary gives up. */
const MAX_EARLY_DEATHS = 5;
const EARLY_MS = 5_000;

/** `--workers`: a count, or `auto` for the machine's cores. */
export function workerCount(value: string | undefined): number {
  if (value === undefined) return 1;
  if (value === 'auto') return availableParallelism();
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 256) {
    throw new Error(`--workers must be a number from 1 to 256, or auto, got '${value}'`);
  }
  return Number(value);
}

export function isWorker(): boolean {
  return cluster.isWorker;
}

/** Runs `count` workers of this same command until a signal stops them; resolves with the exit code. */
export function superviseWorkers(count: number, log: (line: string) => void): Promise<number> {
  return new Promise((resolve) => {
    let stopping = false;
    let earlyDeaths = 0;
    const started = new Map<Worker, number>();
    const fork = () => started.set(cluster.fork(), Date.now());
    for (let i = 0; i < count; i++) fork();

    cluster.on('exit', (worker, code, signal) => {
      const since = started.get(worker) ?? 0;
      started.delete(worker);
      if (stopping) {
        if (started.size === 0) resolve(0);
        return;
      }
      log(`svc-gateway: worker ${worker.process.pid} exited (${signal ?? `code ${code}`}); starting another`);
      if (Date.now() - since < EARLY_MS && ++earlyDeaths >= MAX_EARLY_DEATHS) {
        log('svc-gateway: workers keep dying at start; giving up');
        stopping = true;
        for (const other of started.keys()) other.process.kill('SIGTERM');
        if (started.size === 0) resolve(1);
        return;
      }
      fork();
    });
    const stop = () => {
      stopping = true;
      for (const worker of started.keys()) worker.process.kill('SIGTERM');
      if (started.size === 0) resolve(0);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
