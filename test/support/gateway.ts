/**
 * Starts a real gateway for a test: a fresh SQLite file, the app listening on
 * an ephemeral port, logs captured, and helpers to make accounts and keys.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import { buildApp } from '../../src/app.js';
import type { Clock } from '../../src/clock.js';
import { parseConfig } from '../../src/config.js';
import { issueApiKey } from '../../src/keys/issue.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Environment, Store } from '../../src/store/types.js';
import { after, before } from 'node:test';
import { startFakeUpstream, type FakeUpstream } from './fake-upstream.js';

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
  store: SqliteStore;
  dbPath: string;
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
  const dir = mkdtempSync(join(tmpdir(), 'svc-gw-test-'));
  const dbPath = join(dir, 'gateway.db');
  const clock = options.clock;
  const store = SqliteStore.open(dbPath, clock);
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
    leaseMs: options.leaseMs, sweepEveryMs: options.sweepEveryMs,
  });
  const origin = await app.listen({ port: 0, host: '127.0.0.1' });
  const baseURL = `${origin}/v1`;

  return {
    baseURL, origin, app, store, dbPath, logs,
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
      await store.close();
      rmSync(dir, { recursive: true, force: true });
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
