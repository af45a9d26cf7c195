/**
 * The benchmark cannot rot: a few seconds of `npm run bench` in its quick mode
 * (SQLite, one worker, small loads), from a fresh build, must run every
 * scenario, answer every request, and write its JSON. No figure is asserted:
 * speed is measured by the bench itself, never by a test.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';

const run = promisify(execFile);

describe('npm run bench (quick)', { timeout: 180_000 }, () => {
  it('runs every scenario direct and through the gateway, with no failed request, and writes the table as JSON', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-bench-smoke-'));
    try {
      const out = join(dir, 'bench.json');
      await run('npm', ['run', 'build', '--silent'], { timeout: 120_000 });
      const { stdout } = await run(process.execPath, ['--import', 'tsx', 'bench/run.ts'], {
        env: { ...process.env, BENCH_QUICK: '1', BENCH_OUT: out }, timeout: 120_000,
      });
      assert.match(stdout, /req\/s/);
      const report = JSON.parse(readFileSync(out, 'utf8')) as {
        rows: Array<{ scenario: string; target: string; requests: number; errors: number; firstError: string | null; gatewayCpuMsPerRequest: number | null; peakRssMb: number | null }>;
      };
      const scenarios = new Set(report.rows.map((r) => r.scenario));
      assert.deepEqual([...scenarios].sort(), ['100k-token prompt x1', '50 open streams', 'json x1', 'json x8', 'stream x1'].sort());
      for (const row of report.rows) {
        assert.ok(row.requests > 0, `${row.scenario} ${row.target}: no request was made`);
        assert.equal(row.errors, 0, `${row.scenario} ${row.target}: ${row.firstError}`);
        if (row.target === 'gateway') {
          // The ratio to the mock may be null in so short a run (the mock used less than a clock tick).
          assert.equal(typeof row.gatewayCpuMsPerRequest, 'number', `${row.scenario}: the gateway's CPU was read`);
          assert.ok((row.peakRssMb ?? 0) > 0, `${row.scenario}: the gateway's memory was read`);
        }
      }
      assert.ok(report.rows.some((r) => r.target === 'direct'), 'a direct baseline ran');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
