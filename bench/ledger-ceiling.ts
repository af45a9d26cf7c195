/**
 * `npm run bench:ledger`: how many reserve+settle pairs per second one database
 * sustains, driven through our own Store code by several client processes at
 * once (pgbench-style: each process a Store with its own connections, each
 * running a fixed number of loops of reserve then settle, each loop on an
 * account of its own, as distinct callers are). One more run puts every loop
 * on one hot account, the worst case: its grant rows serialise the transactions.
 *
 *   CEILING_STORES=sqlite,postgres  CEILING_PROCESSES=4  CEILING_LOOPS=8  CEILING_SECONDS=10
 *   CEILING_POSTGRES_URL (else DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres)
 *
 * Each run gets a fresh database (a temp SQLite file, or a PostgreSQL database
 * created and dropped by this script). Prints a table; writes JSON under bench/results/.
 */
import { fork } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { Client, escapeIdentifier } from 'pg';
import { newId } from '../src/ids.js';
import { issueApiKey } from '../src/keys/issue.js';
import { openStore } from '../src/store/open.js';
import type { ReservationPlanner, Store } from '../src/store/types.js';

const PROCESSES = Number(process.env.CEILING_PROCESSES ?? 4);
const LOOPS = Number(process.env.CEILING_LOOPS ?? 8);
const SECONDS = Number(process.env.CEILING_SECONDS ?? 10);
const STORES = (process.env.CEILING_STORES ?? 'sqlite,postgres').split(',');
const POSTGRES = process.env.CEILING_POSTGRES_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const HOLD = 20;
const CHARGE = 13;

interface Work { url: string; accounts: Array<{ accountId: string; keyId: string }>; seconds: number }
interface Done { pairs: number; refused: number; errors: number; latencies: number[] }

const take: ReservationPlanner = (funds) => (funds.available >= HOLD
  ? { ok: true, amount: HOLD, maxOutput: HOLD }
  : { ok: false, reason: 'insufficient_credits', message: 'spent' });

/** One client process: `accounts.length` loops, each reserve → settle on its own account, until time is up. */
async function client(work: Work): Promise<Done> {
  const store = await openStore(work.url);
  const done: Done = { pairs: 0, refused: 0, errors: 0, latencies: [] };
  const deadline = Date.now() + work.seconds * 1000;
  await Promise.all(work.accounts.map(async ({ accountId, keyId }) => {
    while (Date.now() < deadline) {
      const started = process.hrtime.bigint();
      try {
        const reservationId = newId('res');
        const outcome = await store.reserve({ reservationId, accountId, keyId, model: 'svc-fast', leaseMs: 30_000 }, take);
        if (!outcome.ok) {
          done.refused += 1;
          continue;
        }
        await store.settle({ reservationId, credits: CHARGE, promptTokens: 100, completionTokens: 50, routedModel: 'bench' });
        done.pairs += 1;
        done.latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
      } catch {
        done.errors += 1;
      }
    }
  }));
  await store.close();
  return done;
}

async function fundedAccounts(store: Store, n: number, hot: boolean): Promise<Array<{ accountId: string; keyId: string }>> {
  const made: Array<{ accountId: string; keyId: string }> = [];
  for (let i = 0; i < (hot ? 1 : n); i++) {
    const account = await store.createAccount(`ceiling-${i}`);
    await store.grant(account.id, 'purchased', 1_000_000_000, null);
    const { record } = await issueApiKey(store, account.id, {});
    made.push({ accountId: account.id, keyId: record.id });
  }
  return hot ? Array.from({ length: n }, () => made[0]!) : made;
}

async function freshDatabase(kind: string): Promise<{ url: string; drop(): Promise<void> }> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'svc-ceiling-'));
    return { url: `sqlite:${join(dir, 'ledger.db')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const name = `svc_ceiling_${randomBytes(4).toString('hex')}`;
  const admin = async (sql: string) => {
    const c = new Client({ connectionString: POSTGRES });
    await c.connect();
    try { await c.query(sql); } finally { await c.end(); }
  };
  await admin(`CREATE DATABASE ${escapeIdentifier(name)}`);
  const url = new URL(POSTGRES);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${escapeIdentifier(name)} WITH (FORCE)`) };
}

function runClient(work: Work): Promise<Done> {
  const child = fork(fileURLToPath(import.meta.url), ['--client'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve(m as Done));
    child.once('exit', (code) => code !== 0 && reject(new Error(`client exited with ${code}`)));
    child.send(work);
  });
}

async function scenario(kind: string, hot: boolean) {
  const db = await freshDatabase(kind);
  try {
    const setup = await openStore(db.url);
    const accounts = await fundedAccounts(setup, PROCESSES * LOOPS, hot);
    await setup.close();
    const results = await Promise.all(Array.from({ length: PROCESSES }, (_, p) =>
      runClient({ url: db.url, accounts: accounts.slice(p * LOOPS, (p + 1) * LOOPS), seconds: SECONDS })));
    const check = await openStore(db.url);
    const report = await check.verifyLedger();
    await check.close();
    const latencies = results.flatMap((r) => r.latencies).sort((a, b) => a - b);
    const pairs = results.reduce((s, r) => s + r.pairs, 0);
    const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] ?? NaN;
    return {
      store: kind, accounts: hot ? 'one hot account' : `${PROCESSES * LOOPS} accounts`, processes: PROCESSES, loops: PROCESSES * LOOPS,
      pairs_per_second: Math.round(pairs / SECONDS), p50_ms: +at(0.5).toFixed(2), p99_ms: +at(0.99).toFixed(2),
      refused: results.reduce((s, r) => s + r.refused, 0), errors: results.reduce((s, r) => s + r.errors, 0),
      ledger_clean: report.disagreements.length === 0,
    };
  } finally {
    await db.drop();
  }
}

async function main(): Promise<void> {
  console.log(`ledger ceiling: ${PROCESSES} client processes × ${LOOPS} loops of reserve+settle, ${SECONDS} s each; ${cpus().length} cores`);
  const rows = [];
  for (const kind of STORES) {
    for (const hot of [false, true]) {
      try {
        rows.push(await scenario(kind, hot));
      } catch (err) {
        console.log(`${kind}: skipped (${(err as Error).message})`);
        break;
      }
    }
  }
  console.log('| store | accounts | pairs/s | p50 ms | p99 ms | refused | errors | ledger verify |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.store} | ${r.accounts} | ${r.pairs_per_second} | ${r.p50_ms} | ${r.p99_ms} | ${r.refused} | ${r.errors} | ${r.ledger_clean ? 'clean' : 'DISAGREES'} |`);
  }
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/ledger-ceiling-${new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-')}.json`;
  writeFileSync(file, JSON.stringify({ date: new Date().toISOString(), cores: cpus().length, processes: PROCESSES, loops: LOOPS, seconds: SECONDS, rows }, null, 2));
  console.log(`written to ${file}`);
}

if (process.argv.includes('--client')) {
  process.once('message', (work) => {
    client(work as Work).then((done) => process.send!(done, () => process.exit(0)), (err: unknown) => {
      console.error(err);
      process.exit(1);
    });
  });
} else {
  await main();
}
