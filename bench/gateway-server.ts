/** The gateway under test, in its own process, on a temp SQLite file, routed to the mock upstream. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp } from '../src/app.js';
import { parseConfig } from '../src/config.js';
import { issueApiKey } from '../src/keys/issue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { fakeUpstreamConfig } from '../test/support/gateway.js';

const upstreamUrl = process.argv[2]!;
const store = SqliteStore.open(join(mkdtempSync(join(tmpdir(), 'svc-bench-')), 'gateway.db'));
const app = await buildApp({ config: parseConfig(fakeUpstreamConfig(upstreamUrl)), store, logger: false, env: { FAKE_UPSTREAM_KEY: 'sk-bench' } });
const account = await store.createAccount('bench');
await store.grant(account.id, 'purchased', 1_000_000_000, null);
const { secret } = await issueApiKey(store, account.id, { name: 'bench' });
const origin = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ url: `${origin}/v1`, key: secret })}\n`);
process.on('SIGTERM', () => void app.close().then(() => store.close()).then(() => process.exit(0)));
