/**
 * The crash simulation's child: opens the store at argv[2] and, for account
 * argv[3] and key argv[4], runs a seeded stream of reserve → settle | release
 * until it is killed. After every answered operation it writes one line to
 * stdout ("reserved <id> <amount>", "settled <id> <charged>", "released <id>")
 * before it goes on, so the parent knows what was answered.
 */
import { writeSync } from 'node:fs';
import { openStore } from '../src/store/open.js';
import type { ReservationPlanner } from '../src/store/types.js';
import { Prng } from './prng.js';

const [url, accountId, keyId, seedText] = process.argv.slice(2);
const rnd = new Prng(Number(seedText));

function take(amount: number): ReservationPlanner {
  return ({ available, capRemaining }) => {
    if (capRemaining !== null && amount > capRemaining) return { ok: false, reason: 'daily_cap', message: 'cap' };
    if (amount > available) return { ok: false, reason: 'insufficient_credits', message: 'credits' };
    return { ok: true, amount, maxOutput: amount };
  };
}

function say(line: string): void {
  writeSync(1, `${line}\n`);
}

const store = await openStore(url!);
for (let n = 0; ; n++) {
  const id = `child_${seedText}_${n}`;
  const amount = rnd.int(1, 40);
  const out = await store.reserve({ reservationId: id, accountId: accountId!, keyId: keyId!, model: 'sim', leaseMs: 30_000 }, take(amount));
  if (!out.ok) { say(`refused ${id}`); continue; }
  say(`reserved ${id} ${amount}`);
  if (rnd.chance(0.15)) {
    await store.release(id);
    say(`released ${id}`);
    continue;
  }
  const credits = Math.max(0, amount + rnd.int(-20, 10));
  const result = await store.settle({ reservationId: id, credits, promptTokens: 1, completionTokens: 1, routedModel: 'sim' });
  say(`settled ${id} ${result.charged}`);
}
