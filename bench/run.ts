/**
 * `npm run bench`: the gateway against its baseline in the same run. The mock
 * upstream and the gateway each run in a process of their own; this process
 * drives a fixed number of concurrent connections for a fixed time, first
 * straight at the mock upstream, then through the gateway, and prints both and
 * their ratios. Every loop is bounded; everything stops by itself.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Pool } from 'undici';

const DURATION_MS = Number(process.env.BENCH_DURATION_MS ?? 5000);
const LEVELS = (process.env.BENCH_CONCURRENCY ?? '1,32').split(',').map(Number);
const WARMUP_MS = 1000;

interface Target { url: string; key: string }
interface Result { requests: number; errors: number; seconds: number; latencies: number[] }

function startChild(script: string, args: string[] = [], nodeArgs: string[] = []): Promise<{ child: ChildProcess; info: Record<string, string> }> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.once('line', (line) => resolve({ child, info: JSON.parse(line) as Record<string, string> }));
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

async function drive(target: Target, stream: boolean, durationMs: number, concurrency: number): Promise<Result> {
  const url = new URL(`${target.url}/chat/completions`);
  const pool = new Pool(url.origin, { connections: concurrency, pipelining: 1 });
  const body = JSON.stringify({
    model: 'svc-fast', stream, max_tokens: 64,
    messages: [{ role: 'user', content: 'Summarize the benefits of connection pooling in two sentences.' }],
  });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${target.key}` };
  const result: Result = { requests: 0, errors: 0, seconds: durationMs / 1000, latencies: [] };
  const deadline = Date.now() + durationMs;
  const worker = async () => {
    while (Date.now() < deadline) {
      const started = process.hrtime.bigint();
      try {
        const res = await pool.request({ path: url.pathname, method: 'POST', headers, body });
        await res.body.text();
        if (res.statusCode !== 200) result.errors += 1;
      } catch {
        result.errors += 1;
      }
      result.requests += 1;
      result.latencies.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await pool.close();
  return result;
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function summary(r: Result) {
  const sorted = [...r.latencies].sort((a, b) => a - b);
  return { rps: r.requests / r.seconds, p50: percentile(sorted, 50), p99: percentile(sorted, 99), errors: r.errors };
}

const upstream = await startChild('bench/upstream-server.ts');
// BENCH_PROFILE=1 writes a CPU profile of the gateway process (./bench-profiles/).
const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=bench-profiles'] : [];
const gateway = await startChild('bench/gateway-server.ts', [upstream.info.url!], profile);
const direct: Target = { url: upstream.info.url!, key: 'unused' };
const viaGateway: Target = { url: gateway.info.url!, key: gateway.info.key! };
try {
  console.log(`svc-gateway bench: ${DURATION_MS} ms per run, model svc-fast, max_tokens 64; mock upstream, gateway and load each in a process`);
  console.log('scenario            target    req/s      p50 ms   p99 ms   errors');
  for (const concurrency of LEVELS) {
    for (const stream of [false, true]) {
      const name = `${stream ? 'stream' : 'json'} x${concurrency}`.padEnd(19);
      await drive(direct, stream, WARMUP_MS, concurrency);
      await drive(viaGateway, stream, WARMUP_MS, concurrency);
      const base = summary(await drive(direct, stream, DURATION_MS, concurrency));
      const gw = summary(await drive(viaGateway, stream, DURATION_MS, concurrency));
      for (const [label, s] of [['direct', base], ['gateway', gw]] as const) {
        console.log(`${name} ${label.padEnd(9)} ${s.rps.toFixed(0).padStart(7)}  ${s.p50.toFixed(2).padStart(8)} ${s.p99.toFixed(2).padStart(8)}   ${s.errors}`);
      }
      console.log(`${name} ratio     throughput ${(gw.rps / base.rps).toFixed(2)}x of direct; ` +
        `p50 +${(gw.p50 - base.p50).toFixed(2)} ms (${(gw.p50 / base.p50).toFixed(2)}x); p99 ${(gw.p99 / base.p99).toFixed(2)}x`);
    }
  }
} finally {
  upstream.child.kill('SIGTERM');
  gateway.child.kill('SIGTERM');
}
