/**
 * A child process for test/store/multi-process.test.ts: opens its own Store on
 * the shared SQLite file, says `ready`, waits for `go`, then runs reserve +
 * settle (or release) cycles as fast as it can and reports every outcome.
 *
 * argv: <dbPath> <accountId> <keyId> <cycles> <workerIndex>. Import only its types:
 * importing a value would run a worker in the importing process.
 */
import { newId } from '../../src/ids.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { take } from './store-fixture.js';

const RESERVE_AMOUNT = 10;

export interface WorkerSettlement {
  reservationId: string;
  /** What the worker asked settle to charge; null when it released instead. */
  asked: number | null;
  charged: number;
  shortfall: number;
}

export type WorkerMessage =
  | { type: 'ready' }
  | { type: 'done'; settlements: WorkerSettlement[]; refusals: number; errors: string[] };

/** What cycle `i` of worker `w` asks settle for: below, at and above the reservation; every 7th releases. */
function askedFor(worker: number, cycle: number): number | null {
  if ((cycle + worker) % 7 === 0) return null;
  return 4 + ((cycle * 3 + worker) % 11); // 4 … 14
}

async function main(): Promise<void> {
  const [dbPath, accountId, keyId, cyclesText, workerText] = process.argv.slice(2);
  if (!dbPath || !accountId || !keyId || !cyclesText || !workerText) throw new Error('usage: reserve-worker <db> <account> <key> <cycles> <worker>');
  const cycles = Number(cyclesText);
  const worker = Number(workerText);
  const store = SqliteStore.open(dbPath);
  const send = (message: WorkerMessage) => new Promise<void>((resolve) => process.send!(message, () => resolve()));

  await new Promise<void>((resolve) => {
    process.once('message', () => resolve());
    void send({ type: 'ready' });
  });

  const settlements: WorkerSettlement[] = [];
  const errors: string[] = [];
  let refusals = 0;
  for (let cycle = 0; cycle < cycles; cycle++) {
    const reservationId = newId('res');
    try {
      const outcome = await store.reserve(
        { reservationId, accountId, keyId, model: 'svc-fast', leaseMs: 60_000 },
        take(RESERVE_AMOUNT),
      );
      if (!outcome.ok) {
        refusals++;
        continue;
      }
      const asked = askedFor(worker, cycle);
      if (asked === null) {
        await store.release(reservationId);
        settlements.push({ reservationId, asked, charged: 0, shortfall: 0 });
      } else {
        const result = await store.settle({ reservationId, credits: asked, promptTokens: 5, completionTokens: asked, routedModel: 'fake' });
        settlements.push({ reservationId, asked, charged: result.charged, shortfall: result.shortfall });
      }
    } catch (err) {
      errors.push(String(err));
    }
    // Requests arrive spaced out, not back to back: without a pause, SQLite's busy
    // handler lets whichever process holds the lock keep it, and the runs serialise.
    await new Promise((resolve) => setTimeout(resolve, (cycle * 7 + worker * 3) % 4));
  }
  await store.close();
  await send({ type: 'done', settlements, refusals, errors });
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`${String(err)}\n`);
    process.exit(1);
  },
);
