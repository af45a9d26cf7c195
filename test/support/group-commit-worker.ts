/**
 * A child process for test/store/group-commit.test.ts: opens the SQLite file,
 * then runs waves of concurrent reserve + settle pairs (so that they share
 * group commits) for ever, printing `settled <reservation> <charged>` the
 * moment each settle's promise resolves. The parent kills it with SIGKILL at
 * a moment of its choosing: in the middle of a batch, as often as not.
 *
 * argv: <dbPath> <accountId> <keyId> <wave>. Stdout on a pipe is synchronous on
 * Linux, so a printed line was written before the next write began.
 */
import { newId } from '../../src/ids.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { take } from './store-fixture.js';

const [dbPath, accountId, keyId, waveText] = process.argv.slice(2);
if (!dbPath || !accountId || !keyId || !waveText) throw new Error('usage: group-commit-worker <db> <account> <key> <wave>');
const store = SqliteStore.open(dbPath);
const wave = Number(waveText);

async function pair(i: number): Promise<void> {
  const reservationId = newId('res');
  const outcome = await store.reserve({ reservationId, accountId: accountId!, keyId: keyId!, model: 'svc-fast', leaseMs: 600_000 }, take(10));
  if (!outcome.ok) return;
  const result = await store.settle({ reservationId, credits: 3 + (i % 9), promptTokens: 5, completionTokens: 7, routedModel: 'fake' });
  process.stdout.write(`settled ${reservationId} ${result.charged}\n`);
}

for (let round = 0; ; round++) {
  await Promise.all(Array.from({ length: wave }, (_, i) => pair(round * wave + i)));
}
