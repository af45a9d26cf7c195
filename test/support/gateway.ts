/**
 * Starts a real gateway for a test: a fresh database, the app listening on an
 * ephemeral port, logs captured, and helpers to make accounts and keys.
 *
 * The database is a fresh SQLite file, or, when the run was started with
 * SVC_E2E_BACKEND=postgres (`npm test` does so for a second pass over the
 * end-to-end suite whenever SVC_TEST_POSTGRES_URL names a server), a fresh
 * PostgreSQL schema: every end-to-end test runs on both stores.
 */
import { Writable } from 'node:stream';
import BetterSqlite3 from 'better-sqlite3';
import { Client } from 'pg';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { buildApp, type AppDeps } from '../../src/app.js';
import type { Clock } from '../../src/clock.js';
import { parseConfig } from '../../src/config.js';
import { issueApiKey } from '../../src/keys/issue.js';
import type { Environment, Store } from '../../src/store/types.js';
import { after, before } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.js';
import { dropTestDatabase, openTempStore, type Backend, type TempStore } from './store-fixture.js';

/** The backend of this run's end-to-end gateways: SVC_E2E_BACKEND, default sqlite. */
export const E2E_BACKEND: Backend = process.env.SVC_E2E_BACKEND === 'postgres' ? 'postgres' : 'sqlite';
// The test database outlives every suite of the file; it goes when the file's process has nothing left to do.
if (E2E_BACKEND === 'postgres') process.once('beforeExit', () => void dropTestDatabase());

/** A clock that tests move by hand. */
export class TestClock implements Clock {
  private at: number;
  constructor(start: Date | string = '2026-11-21T12:00:00Z') {
    this.at = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.at);
  }
  advance(ms: number): void {
    this.at += ms;
  }
  set(at: Date | string): void {
    this.at = new Date(at).getTime();
  }
}

export interface AccountSetup {
  name?: string;
  purchased?: number;
  earned?: Array<{ amount: number; expiresAt: Date | string }>;
  key?: { environment?: Environment; dailyCreditLimit?: number | null; name?: string };
}

export interface TestAccount {
  accountId: string;
  keyId: string;
  key: string;
}

export interface TestGateway {
  /** `http://127.0.0.1:PORT/v1`, the openai SDK's baseURL. */
  baseURL: string;
  origin: string;
  app: FastifyInstance;
  store: Store;
  backend: Backend;
  /** What `--database` takes to open the same ledger: `sqlite:<file>` or the PostgreSQL URL. */
  databaseUrl: string;
  /** Rows from a second connection to the gateway's database; `?` placeholders on both backends. */
  rows<T>(sql: string, ...params: unknown[]): Promise<T[]>;
  /** Runs a statement on that second connection (tests that tamper with the ledger). */
  exec(sql: string, ...params: unknown[]): Promise<number>;
  /** Every log line the gateway wrote. */
  logs: string[];
  createAccount(setup?: AccountSetup): Promise<TestAccount>;
  client(key: string, options?: { maxRetries?: number }): OpenAI;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** Raw config (as a YAML/JSON file would hold); default: the four aliases on `upstreamUrl`, else the simulator. */
  config?: unknown;
  /** Base URL of a fake upstream for the default config's routes. */
  upstreamUrl?: string;
  clock?: Clock;
  adminToken?: string;
  leaseMs?: number;
  sweepEveryMs?: number;
  /** Puts a layer between the app and its real store (fault injection: a database that refuses some calls). */
  wrapStore?: (store: Store) => Store;
  /** Process metrics (prom-client's default collectors) on /metrics, as `serve` has them. */
  defaultMetrics?: boolean;
  /** Sees every route the app registers. */
  onRoute?: AppDeps['onRoute'];
}

/** The spec's four aliases, each routed to the fake upstream's model of the same name as the alias. */
export function fakeUpstreamConfig(upstreamUrl: string, routes: Record<string, string[]> = {}, routing: Record<string, unknown> = {}): unknown {
  const model = (id: string, name: string, window: number, input: number, output: number) => ({
    id, name, context_window: window, description: name,
    pricing: { input_credits_per_1k: input, output_credits_per_1k: output },
    routes: (routes[id] ?? [`${id}-ok`]).map((m) => ({ provider: 'fake', model: m })),
  });
  return {
    providers: [{ id: 'fake', type: 'openai', base_url: upstreamUrl, api_key_env: 'FAKE_UPSTREAM_KEY' }],
    models: [
      { id: 'svc-auto', name: 'SVC Auto', context_window: 128_000, description: 'auto',
        pricing: { input_credits_per_1k: 10, output_credits_per_1k: 30 },
        auto: { simple: 'svc-fast', code: 'svc-code', complex: 'svc-smart' } },
      model('svc-fast', 'SVC Fast', 64_000, 4, 12),
      model('svc-code', 'SVC Code', 128_000, 12, 40),
      model('svc-smart', 'SVC Smart', 128_000, 25, 75),
    ],
    routing: { first_byte_timeout_ms: 2000, ...routing },
  };
}

export async function startGateway(options: GatewayOptions = {}): Promise<TestGateway> {
  const clock = options.clock;
  const temp: TempStore = await openTempStore(clock, E2E_BACKEND);
  const store = temp.store;
  const logs: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      logs.push(...String(chunk).split('\n').filter(Boolean));
      done();
    },
  });
  const source = options.config ?? (options.upstreamUrl
    ? fakeUpstreamConfig(options.upstreamUrl)
    : undefined);
  const config = parseConfig(source ?? (await import('../../src/config.js')).DEFAULT_CONFIG_SOURCE);
  const app = await buildApp({
    config, store: options.wrapStore ? options.wrapStore(store) : store, clock, adminToken: options.adminToken ?? null,
    env: { FAKE_UPSTREAM_KEY: 'sk-fake-upstream' },
    logger: { level: 'debug', stream },
    leaseMs: options.leaseMs, sweepEveryMs: options.sweepEveryMs, defaultMetrics: options.defaultMetrics, onRoute: options.onRoute,
  });
  const origin = await app.listen({ port: 0, host: '127.0.0.1' });
  const baseURL = `${origin}/v1`;

  return {
    baseURL, origin, app, store, logs,
    backend: temp.backend,
    databaseUrl: temp.url,
    rows: (sql, ...params) => temp.rows(sql, ...params),
    exec: (sql, ...params) => temp.exec(sql, ...params),
    async createAccount(setup = {}) {
      const account = await store.createAccount(setup.name ?? null);
      if (setup.purchased) await store.grant(account.id, 'purchased', setup.purchased, null);
      for (const e of setup.earned ?? []) await store.grant(account.id, 'earned', e.amount, new Date(e.expiresAt));
      const { record, secret } = await issueApiKey(store, account.id, {
        environment: setup.key?.environment, daily_credit_limit: setup.key?.dailyCreditLimit ?? null, name: setup.key?.name,
      });
      return { accountId: account.id, keyId: record.id, key: secret };
    },
    client(key, clientOptions = {}) {
      return new OpenAI({ apiKey: key, baseURL, maxRetries: clientOptions.maxRetries ?? 0, timeout: 20_000 });
    },
    async close() {
      await app.close();
      await temp.cleanup();
    },
  };
}

/**
 * Holds the gateway's database from another connection, as another process
 * would: SQLite's write lock, or PostgreSQL locks on the tables a request
 * writes first (its Idempotency-Key claim, its reservation).
 */
export async function holdDatabase(gw: Pick<TestGateway, 'backend' | 'databaseUrl'>): Promise<{ release(): Promise<void> }> {
  if (gw.backend === 'sqlite') {
    const raw = new BetterSqlite3(gw.databaseUrl.slice('sqlite:'.length));
    raw.exec('BEGIN IMMEDIATE');
    return {
      async release() {
        raw.exec('COMMIT');
        raw.close();
      },
    };
  }
  const client = new Client({ connectionString: gw.databaseUrl });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE idempotency_keys, reservations IN EXCLUSIVE MODE');
  return {
    async release() {
      await client.query('COMMIT');
      await client.end();
    },
  };
}

export interface GatewayWithUpstream {
  readonly gw: TestGateway;
  readonly upstream: FakeUpstream;
}

/**
 * Registers before/after hooks in the current suite that start a fake upstream
 * and a gateway routed to it (`configure` shapes the config), and stop both.
 * The returned object's fields are set once the suite runs.
 */
export function useGatewayWithUpstream(
  configure: (upstreamUrl: string) => unknown,
  options: { reply?: string } = {},
): GatewayWithUpstream {
  const context = {} as { gw: TestGateway; upstream: FakeUpstream };
  before(async () => {
    context.upstream = await startFakeUpstream(options.reply === undefined ? {} : { reply: options.reply });
    context.gw = await startGateway({ config: configure(context.upstream.url) });
  });
  after(async () => {
    await context.gw.close();
    await context.upstream.close();
  });
  return context;
}
