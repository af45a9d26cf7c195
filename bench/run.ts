/**
 * `npm run bench`: the gateway against its baseline, in one run. A minimal
 * OpenAI-format mock upstream, the real `svc-gateway serve` (built, from
 * dist/) on a fresh database with a funded account, and a load generator, each
 * in a process of its own. Every scenario runs straight at the mock and then
 * through the gateway, interleaved, and the table shows both, their ratio, and
 * the CPU each process tree used per request (from /proc, same phase).
 *
 *   BENCH_DURATION_MS   measured time per phase (default 5000; a 1 s warm-up precedes each target)
 *   BENCH_QUICK=1       the smoke run of the test suite: SQLite, one worker, small loads
 *   BENCH_POSTGRES_URL  a PostgreSQL server for the PostgreSQL rows (default SVC_TEST_POSTGRES_URL;
 *                       neither set: those rows are skipped with a notice)
 *   BENCH_PROFILE=1     the gateway writes a CPU profile (node --cpu-prof) to bench-profiles/
 *   BENCH_OUT           where to write the JSON (default bench/results/bench-<time>.json)
 *   BENCH_ONLY          run only the rows whose "gateway scenario" contains this text, e.g. "sqlite 1w json x64"
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import type { LoadResult, LoadSpec } from './load.js';
import { cpuSeconds, processTree, rssPeak } from './proc.js';

const QUICK = process.env.BENCH_QUICK === '1';
const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? (QUICK ? 400 : 5000));
const WARMUP_MS = QUICK ? 200 : 1000;
const HOLD_STREAMS = Number(process.env.BENCH_HOLD_STREAMS ?? (QUICK ? 50 : 5000));
const HOLD_MS = QUICK ? 500 : 15_000;
const RAMP_MS = QUICK ? 100 : 5000;
const ONLY = process.env.BENCH_ONLY ?? '';
const POSTGRES_URL = process.env.BENCH_POSTGRES_URL ?? process.env.SVC_TEST_POSTGRES_URL;

interface Row {
  gateway: string;
  scenario: string;
  target: 'direct' | 'gateway';
  requests: number;
  errors: number;
  firstError: string | null;
  rps: number;
  p50: number;
  p99: number;
  ttftP50: number | null;
  ttftP99: number | null;
  /** Gateway rows: the gateway tree's CPU per request ÷ the mock's in the same phase. */
  cpuRatio: number | null;
  gatewayCpuMsPerRequest: number | null;
  upstreamCpuMsPerRequest: number;
  peakRssMb: number | null;
}

interface Running { child: ChildProcess; info: Record<string, unknown> }

function startChild(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Running> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', (line) => resolve({ child, info: JSON.parse(line) as Record<string, unknown> }));
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

function runNode(args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  return new Promise((resolve, reject) => child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${args.join(' ')}: exit ${code}`)))));
}

async function load(spec: LoadSpec): Promise<LoadResult> {
  const out = await runNode(['--import', 'tsx', 'bench/load.ts', JSON.stringify(spec)], process.env);
  return JSON.parse(out) as LoadResult;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function waitReady(origin: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${origin}/readyz`)).ok) return;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${origin} never became ready`);
}

function benchConfig(upstreamUrl: string): unknown {
  const model = (id: string, upstreamModel: string) => ({
    id, name: id, description: id, context_window: 400_000,
    pricing: { input_credits_per_1k: 4, output_credits_per_1k: 12 },
    routes: [{ provider: 'mock', model: upstreamModel }],
  });
  return {
    providers: [{ id: 'mock', type: 'openai', base_url: upstreamUrl, api_key_env: 'BENCH_UPSTREAM_KEY', connections: 20_000 }],
    models: [model('svc-fast', 'bench-model'), model('svc-hold', `slow-stream-${HOLD_MS}`)],
    limits: { max_in_flight: 20_000 },
    server: { max_connections: 20_000 },
  };
}

interface Gateway { name: string; origin: string; key: string; pids(): number[]; stop(): Promise<void> }

async function startGateway(name: string, databaseUrl: string, workers: number, configFile: string): Promise<Gateway> {
  const env = { ...process.env, BENCH_UPSTREAM_KEY: 'sk-bench', DATABASE_URL: databaseUrl };
  const created = JSON.parse(await runNode(['dist/main.js', 'accounts', 'create', '--name', 'bench', '--json'], env)) as
    { account: { id: string }; api_key: { key: string } };
  await runNode(['dist/main.js', 'credits', 'grant', '--account', created.account.id, '--kind', 'purchased', '--amount', '1000000000000', '--json'], env);
  const port = await freePort();
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=bench-profiles'] : [];
  const child = spawn(process.execPath, [...profile, 'dist/main.js', 'serve', '--config', configFile, '--host', '127.0.0.1', '--port', String(port), '--workers', String(workers)],
    { stdio: ['ignore', 'ignore', 'ignore'], env });
  const origin = `http://127.0.0.1:${port}`;
  await waitReady(origin);
  const pid = child.pid!;
  return {
    name, origin, key: created.api_key.key,
    pids: () => processTree(pid),
    stop: () => new Promise((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    }),
  };
}

async function measure(gateway: string, scenario: string, target: 'direct' | 'gateway', spec: LoadSpec, mockPid: number, gw: Gateway | null): Promise<Row> {
  if (spec.mode !== 'hold') await load({ ...spec, durationMs: WARMUP_MS, requests: spec.requests ? 2 : undefined });
  const gwPids = gw ? gw.pids() : [];
  const mockBefore = cpuSeconds([mockPid]);
  const gwBefore = cpuSeconds(gwPids);
  const rss = gw ? rssPeak(() => gw.pids()) : null;
  const result = await load(spec);
  const peakRssMb = rss ? rss.stop() : null;
  const upstreamCpuMsPerRequest = ((cpuSeconds([mockPid]) - mockBefore) * 1000) / Math.max(1, result.requests);
  const gatewayCpuMsPerRequest = gw ? ((cpuSeconds(gwPids) - gwBefore) * 1000) / Math.max(1, result.requests) : null;
  return {
    gateway, scenario, target, ...result, upstreamCpuMsPerRequest, gatewayCpuMsPerRequest, peakRssMb,
    cpuRatio: gatewayCpuMsPerRequest === null || upstreamCpuMsPerRequest === 0 ? null : gatewayCpuMsPerRequest / upstreamCpuMsPerRequest,
  };
}

interface Scenario { name: string; spec: Omit<LoadSpec, 'url' | 'key'> }

const json = (connections: number): Scenario => ({ name: `json x${connections}`, spec: { mode: 'json', model: 'svc-fast', connections, durationMs: DURATION_MS, prompt: 'short' } });
const stream = (connections: number): Scenario => ({ name: `stream x${connections}`, spec: { mode: 'stream', model: 'svc-fast', connections, durationMs: DURATION_MS, prompt: 'short' } });
const huge: Scenario = { name: '100k-token prompt x1', spec: { mode: 'json', model: 'svc-fast', connections: 1, durationMs: 60_000, requests: QUICK ? 2 : 10, prompt: 'huge' } };
const hold: Scenario = { name: `${HOLD_STREAMS} open streams`, spec: { mode: 'hold', model: 'svc-hold', connections: HOLD_STREAMS, durationMs: 0, rampMs: RAMP_MS, prompt: 'story' } };

const fmt = (n: number | null, digits = 2) => (n === null || Number.isNaN(n) ? '—' : n.toFixed(digits));

function printPair(direct: Row | null, via: Row): void {
  const line = (r: Row) => `${r.gateway.padEnd(14)} ${r.scenario.padEnd(20)} ${r.target.padEnd(8)} ${fmt(r.rps, 0).padStart(7)} ${fmt(r.p50).padStart(8)} ${fmt(r.p99).padStart(8)} ` +
    `${fmt(r.ttftP50).padStart(8)} ${fmt(r.gatewayCpuMsPerRequest ?? r.upstreamCpuMsPerRequest, 3).padStart(9)} ${fmt(r.cpuRatio, 1).padStart(6)} ${fmt(r.peakRssMb, 0).padStart(6)} ${String(r.errors).padStart(6)}`;
  if (direct) console.log(line(direct));
  console.log(line(via));
  if (direct) {
    const ttft = via.ttftP50 !== null && direct.ttftP50 !== null ? `; ttft p50 +${fmt(via.ttftP50 - direct.ttftP50)} ms` : '';
    console.log(`${''.padEnd(36)}→ ${fmt(via.rps / direct.rps)}x of direct req/s; p50 +${fmt(via.p50 - direct.p50)} ms, p99 +${fmt(via.p99 - direct.p99)} ms${ttft}`);
  }
  if (via.firstError) console.log(`${''.padEnd(36)}first error: ${via.firstError.slice(0, 160)}`);
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const mock = await startChild(['--import', 'tsx', 'bench/mock-upstream.ts']);
  const mockUrl = String(mock.info.url);
  const mockPid = Number(mock.info.pid);
  const configFile = join(work, 'gateway.json');
  writeFileSync(configFile, JSON.stringify(benchConfig(mockUrl)));
  const rows: Row[] = [];
  const cleanups: Array<() => Promise<void>> = [];

  const backends: Array<{ name: string; url: () => Promise<string>; workers: number; scenarios: Scenario[] }> = [
    { name: 'sqlite 1w', url: async () => `sqlite:${join(work, 'one.db')}`, workers: 1, scenarios: QUICK ? [json(1), json(8), stream(1), huge, hold] : [json(1), json(64), stream(1), stream(64), huge, hold] },
  ];
  if (!QUICK) backends.push({ name: 'sqlite 2w', url: async () => `sqlite:${join(work, 'two.db')}`, workers: 2, scenarios: [json(64)] });
  if (!QUICK && POSTGRES_URL) {
    const database = async (): Promise<string> => {
      const name = `svc_bench_${randomBytes(4).toString('hex')}`;
      const admin = new pg.Client({ connectionString: POSTGRES_URL });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name}`);
      await admin.end();
      cleanups.push(async () => {
        const c = new pg.Client({ connectionString: POSTGRES_URL });
        await c.connect();
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await c.end();
      });
      const url = new URL(POSTGRES_URL);
      url.pathname = `/${name}`;
      return url.toString();
    };
    backends.push({ name: 'postgres 1w', url: database, workers: 1, scenarios: [json(1), json(64)] });
    backends.push({ name: 'postgres 2w', url: database, workers: 2, scenarios: [json(64)] });
  } else if (!QUICK) {
    console.log('PostgreSQL rows skipped: set BENCH_POSTGRES_URL (or SVC_TEST_POSTGRES_URL) to a server, e.g. postgres://postgres@127.0.0.1:5432/postgres');
  }

  console.log(`svc-gateway bench ${new Date().toISOString()}: ${cpus().length} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}; ${DURATION_MS} ms a phase`);
  console.log('gateway        scenario             target     req/s  p50 ms   p99 ms  ttft ms  cpu ms/req  ×mock  rss MB errors');
  try {
    for (const backend of backends) {
      backend.scenarios = backend.scenarios.filter((s) => `${backend.name} ${s.name}`.includes(ONLY));
      if (backend.scenarios.length === 0) continue;
      const gw = await startGateway(backend.name, await backend.url(), backend.workers, configFile);
      try {
        for (const scenario of backend.scenarios) {
          const direct = scenario === hold ? null
            : await measure(backend.name, scenario.name, 'direct', { ...scenario.spec, url: mockUrl, key: 'unused', model: 'bench-model' }, mockPid, null);
          const via = await measure(backend.name, scenario.name, 'gateway', { ...scenario.spec, url: `${gw.origin}/v1`, key: gw.key }, mockPid, gw);
          if (direct) rows.push(direct);
          rows.push(via);
          printPair(direct, via);
        }
      } finally {
        await gw.stop();
      }
    }
  } finally {
    mock.child.kill('SIGTERM');
    for (const cleanup of cleanups) await cleanup().catch(() => undefined);
    rmSync(work, { recursive: true, force: true });
  }
  const out = process.env.BENCH_OUT ?? join('bench', 'results', `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(join(out, '..'), { recursive: true });
  writeFileSync(out, `${JSON.stringify({ date: new Date().toISOString(), cores: cpus().length, node: process.version, durationMs: DURATION_MS, rows }, null, 2)}\n`);
  console.log(`written: ${out}`);
}

await main();
