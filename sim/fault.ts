/**
 * A process killed with SIGKILL in the middle of its stream of operations
 * (between two, or inside one's transaction), then the store reopened: every
 * settle the child answered is on the ledger with what it answered, no partial
 * transaction shows (the ledger replays to the balances, holds match open
 * reservations), and once a sweeper has closed what the dead process held,
 * nothing is reserved and the balance is what was granted less what was charged.
 * The one operation in flight at the kill may have committed or not; either is accepted.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { issueApiKey } from '../src/keys/issue.js';
import { fail, invariants, verifyClean, ViolationError, type Violation } from './check.js';
import { Model } from './model.js';
import { Prng } from './prng.js';
import { toViolation } from './runner.js';
import { openTarget, type Backend } from './target.js';

const CHILD = fileURLToPath(new URL('./child.ts', import.meta.url));

export interface FaultReport { answered: number; violation: Violation | null }

export async function runFault(seed: number, backend: Backend, postgresUrl?: string): Promise<FaultReport> {
  const rnd = new Prng(seed);
  const clock = { at: Date.now(), now(): Date { return new Date(this.at); } };
  const target = await openTarget({ backend, instances: 1, clock, ...(postgresUrl && { postgresUrl }) });
  const store = target.stores[0]!;
  const model = new Model();
  const answered = new Map<string, number>();
  try {
    const account = await store.createAccount('crash');
    model.addAccount('crash', account.id);
    const granted = rnd.int(2000, 5000);
    await store.grant(account.id, 'purchased', granted, null);
    const { record } = await issueApiKey(store, account.id, { daily_credit_limit: null });

    const lines = await runChild(target.url, account.id, record.id, seed, rnd.int(5, 80), rnd.chance(0.5) ? 0 : rnd.int(1, 15));
    const reserved = new Set<string>();
    const released = new Set<string>();
    for (const line of lines) {
      const [what, id, n] = line.split(' ');
      if (what === 'settled') answered.set(id!, Number(n));
      if (what === 'reserved') reserved.add(id!);
      if (what === 'released') released.add(id!);
    }
    // The dead process's holds lapse; a sweeper (another instance, later) closes them.
    await target.reopen(0);
    const after = target.stores[0]!;
    const rows = await target.rows<{ id: string; state: string; charged: number }>(
      'SELECT id, state, charged FROM reservations WHERE account_id = ?', account.id);
    for (const [id, charged] of answered) {
      const row = rows.find((r) => r.id === id);
      if (!row || row.state !== 'settled' || row.charged !== charged) {
        fail('every answered settle present after a crash', `${id} answered ${charged}; the store has ${JSON.stringify(row ?? null)}`);
      }
    }
    for (const id of reserved) {
      const row = rows.find((r) => r.id === id);
      if (!row) fail('every answered operation present after a crash', `${id} was answered as reserved; the store has no such reservation`);
      if (released.has(id) && row.state !== 'released') fail('every answered operation present after a crash', `${id} was answered as released; the store has it ${row.state}`);
    }
    await verifyClean(after);
    clock.at += 120_000;
    await after.releaseExpiredLeases();
    const b = await after.balances(account.id);
    const charged = (await target.rows<{ c: number }>(
      `SELECT COALESCE(-SUM(amount), 0) AS c FROM ledger WHERE account_id = ? AND entry = 'charge'`, account.id))[0]!.c;
    if (b.reserved !== 0) fail('a dead process holds nothing once swept', `still reserved: ${b.reserved}`);
    if (b.purchased !== granted - charged) fail('the sum of charges equals the drop in balances', `granted ${granted}, charged ${charged}, left ${b.purchased}`);
    const sumAnswered = [...answered.values()].reduce((a, c) => a + c, 0);
    const inFlight = rows.filter((r) => r.state === 'settled' && !answered.has(r.id));
    if (inFlight.length > 1) fail('every answered settle present after a crash', `settles nobody answered: ${JSON.stringify(inFlight)}`);
    if (charged !== sumAnswered + (inFlight[0]?.charged ?? 0)) fail('the sum of charges equals the drop in balances', `ledger ${charged}, answered ${sumAnswered}`);
    model.account('crash')!.granted = granted;
    model.account('crash')!.charged = charged;
    model.account('crash')!.purchased.balance = b.purchased;
    await invariants(target, model, clock.at);
    await verifyClean(after);
    return { answered: answered.size, violation: null };
  } catch (err) {
    return { answered: answered.size, violation: err instanceof ViolationError ? toViolation(err, 0) : toViolation(err, -1) };
  } finally {
    await target.close();
  }
}

/** Starts the child, lets it answer `lines` operations, kills it `delayMs` later, and answers every line it wrote. */
function runChild(url: string, accountId: string, keyId: string, seed: number, lines: number, delayMs: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, url, accountId, keyId, String(seed)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let killing = false;
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (!killing && out.split('\n').length > lines) {
        killing = true;
        setTimeout(() => child.kill('SIGKILL'), delayMs);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => { err += chunk.toString(); });
    child.on('exit', (_code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`the child ended without being killed: ${err}`));
      // Only whole lines count as answered: a line cut by the kill was never written whole.
      else resolve(out.split('\n').slice(0, -1));
    });
  });
}
