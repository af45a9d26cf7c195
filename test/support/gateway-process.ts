/**
 * A gateway in a process of its own, for crash tests: argv = database path,
 * upstream URL, lease ms. Prints `{"url": …}` once listening; dies however the
 * test kills it.
 */
import { buildApp } from '../../src/app.js';
import { parseConfig } from '../../src/config.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { fakeUpstreamConfig } from './gateway.js';

const [dbPath, upstreamUrl, leaseMs] = process.argv.slice(2);
const store = SqliteStore.open(dbPath!);
const config = parseConfig(fakeUpstreamConfig(upstreamUrl!, { 'svc-fast': ['svc-fast-ok'], 'svc-smart': ['svc-smart-hang'] }, { first_byte_timeout_ms: 60_000 }));
const app = await buildApp({ config, store, logger: false, leaseMs: Number(leaseMs), sweepEveryMs: 60_000, env: { FAKE_UPSTREAM_KEY: 'sk-crash' } });
const origin = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ url: `${origin}/v1` })}\n`);
