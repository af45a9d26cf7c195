#!/usr/bin/env node
/**
 * The second pass of `npm test`: every end-to-end test again, with each test
 * gateway on PostgreSQL (SVC_E2E_BACKEND=postgres), when SVC_TEST_POSTGRES_URL
 * names a server; without it, a notice saying how to run it. Left out: the
 * SQLite crash test (its PostgreSQL twin is instances.test.ts, which already
 * ran in the first pass, being PostgreSQL-only).
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';

const VARIABLE = 'SVC_TEST_POSTGRES_URL';
const SQLITE_ONLY = new Set(['crash.test.ts', 'instances.test.ts']);

if (!process.env[VARIABLE]) {
  console.log(`\nEnd-to-end suite on PostgreSQL skipped: set ${VARIABLE} (e.g. postgres://postgres@127.0.0.1:5432/postgres) to run it.`);
  process.exit(0);
}
const files = readdirSync('test/e2e').filter((f) => f.endsWith('.test.ts') && !SQLITE_ONLY.has(f)).sort().map((f) => `test/e2e/${f}`);
console.log(`\nEnd-to-end suite on PostgreSQL (${files.length} files)`);
const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...files], {
  stdio: 'inherit', env: { ...process.env, SVC_E2E_BACKEND: 'postgres' },
});
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
