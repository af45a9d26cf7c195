/**
 * The example configs that ship with the gateway: each loads, builds with its
 * providers' keys in the environment, and, with every provider's base URL
 * pointed at the fake upstream and every route's model kept as written, serves
 * each of its four aliases through the official openai SDK, JSON and streamed.
 * The models as written matter: `gpt-5` and `o3` are reasoning models, which
 * refuse `max_tokens` and sampling parameters (the fake refuses them as OpenAI
 * does), and the gateway must send them what they take.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, beforeEach, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { buildApp } from '../../src/app.js';
import { ConfigError, loadConfigFile } from '../../src/config.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { startFakeUpstream, type FakeUpstream, vendorOf } from '../support/fake-upstream.js';
import { credits, svcOf, type Svc } from '../support/e2e.js';
import { ledgerVerifyCli } from '../support/e2e-helpers.js';
import { startGateway, type TestGateway } from '../support/gateway.js';

const EXAMPLES = ['gateway.yaml', 'multi-vendor.yaml'] as const;
const ALIASES = ['svc-fast', 'svc-code', 'svc-smart', 'svc-auto'];
const REPLY = 'Here is the answer you asked for.';
const messages = [{ role: 'user' as const, content: 'Say hello to the team' }];
const PROVIDER_KEYS = { OPENAI_API_KEY: 'sk-openai-test', ANTHROPIC_API_KEY: 'sk-ant-test', GEMINI_API_KEY: 'gemini-test-key' };

const examplePath = (file: string) => fileURLToPath(new URL(`../../examples/${file}`, import.meta.url));

interface RawProvider { id: string; type: string; base_url?: string; api_key_env?: string }
interface RawModel { id: string; routes?: Array<{ provider: string; model: string }> }
interface RawConfig { providers: RawProvider[]; models: RawModel[] }

/** The example as written, as the YAML holds it. */
function rawExample(file: string): RawConfig {
  const value: unknown = parseYaml(readFileSync(examplePath(file), 'utf8'));
  const raw = value as RawConfig;
  assert.ok(Array.isArray(raw.providers) && Array.isArray(raw.models), `${file} has providers and models`);
  return raw;
}

/**
 * The example with every provider at the fake: OpenAI's face at `upstream.url`,
 * Anthropic's and Gemini's at its origin (the adapters add their own paths).
 * The key comes from the variable the test gateway sets (the fakes check a key
 * is sent, not which). `down` providers get a path the fake does not serve: 404.
 */
function atFake(raw: RawConfig, upstream: FakeUpstream, down: string[] = []): RawConfig {
  const providers = raw.providers.map((p) => ({
    ...p,
    base_url: down.includes(p.id) ? `${upstream.origin}/down` : p.type === 'openai' ? upstream.url : upstream.origin,
    api_key_env: 'FAKE_UPSTREAM_KEY',
  }));
  return { ...raw, providers };
}


describe('the example configs load and build', () => {
  for (const file of EXAMPLES) {
    it(`${file}: loads with loadConfigFile and builds with its providers' keys in the environment`, async () => {
      const config = loadConfigFile(examplePath(file));
      assert.deepEqual(config.models.map((m) => m.id).sort(), [...ALIASES].sort());
      const dir = mkdtempSync(join(tmpdir(), 'svc-gw-example-'));
      const store = SqliteStore.open(join(dir, 'gateway.db'));
      try {
        // Every api_key_env must be set: without them the build names the first missing variable.
        await assert.rejects(buildApp({ config, store, env: {}, logger: false }),
          (err: unknown) => err instanceof ConfigError && err.message.includes(config.providers[0]!.api_key_env!));
        const app = await buildApp({ config, store, env: PROVIDER_KEYS, logger: false });
        await app.ready();
        await app.close();
      } finally {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

for (const file of EXAMPLES) {
  describe(`${file} served through the fake upstream`, { timeout: 60_000 }, () => {
    const raw = rawExample(file);
    const firstRoute = (alias: string) => raw.models.find((m) => m.id === alias)!.routes![0]!;
    let upstream: FakeUpstream;
    let gw: TestGateway;
    before(async () => {
      upstream = await startFakeUpstream({ reply: REPLY });
      gw = await startGateway({ config: atFake(raw, upstream) });
    });
    after(async () => {
      await gw?.close();
      await upstream?.close();
    });
    beforeEach(() => upstream.reset());

    for (const alias of ALIASES) {
      for (const stream of [false, true]) {
        it(`${alias} answers ${stream ? 'a stream' : 'JSON'} from its first route, with the model as written`, async () => {
          const account = await gw.createAccount({ purchased: 100_000 });
          const client = gw.client(account.key);
          let content: string;
          let svc: Svc;
          if (!stream) {
            const completion = await client.chat.completions.create({ model: alias, messages });
            assert.equal(completion.model, alias);
            content = completion.choices[0]!.message.content ?? '';
            svc = svcOf(completion);
          } else {
            content = '';
            let last: Svc | undefined;
            for await (const chunk of await client.chat.completions.create({ model: alias, messages, stream: true })) {
              content += chunk.choices[0]?.delta.content ?? '';
              last = (chunk as { svc?: Svc }).svc ?? last;
            }
            assert.ok(last, 'the finish chunk carries svc');
            svc = last;
          }
          assert.equal(content, REPLY);
          // svc-auto is served by the alias its classifier chose.
          const serving = alias === 'svc-auto' ? svc.auto?.alias : alias;
          assert.ok(serving && ALIASES.includes(serving), `svc-auto names the alias that served: ${JSON.stringify(svc)}`);
          const route = firstRoute(serving);
          assert.deepEqual([svc.provider, svc.routed_model], [route.provider, route.model]);
          // Served on the first try: a reasoning model refusing the request would show here as a failover.
          const provider = raw.providers.find((p) => p.id === route.provider)!;
          assert.deepEqual(upstream.requests.map((r) => [vendorOf(r), r.model]), [[provider.type, route.model]]);
          assert.ok(svc.credits_used > 0);
          const after = await credits(gw, account.key);
          assert.deepEqual([after.total_credits, after.reserved_credits], [100_000 - svc.credits_used, 0]);
        });
      }
    }

    // multi-vendor.yaml's svc-smart starts with gpt-5; gateway.yaml's o3 is a fallback (tested with Anthropic down, below).
    const reasoning = raw.models.find((m) => m.routes?.[0]?.provider === 'openai' && /^(?:o\d|gpt-5)/.test(m.routes[0].model));
    if (reasoning) {
      it(`sends ${reasoning.routes![0]!.model}, a reasoning model, max_completion_tokens and no sampling parameters`, async () => {
        const account = await gw.createAccount({ purchased: 100_000 });
        await gw.client(account.key).chat.completions.create({ model: reasoning.id, messages });
        const body = upstream.requests[0]!.body;
        assert.equal(typeof body.max_completion_tokens, 'number');
        for (const field of ['max_tokens', 'temperature', 'top_p']) assert.ok(!(field in body), `${field} not sent: ${JSON.stringify(body)}`);
      });
    }

    it('leaves the ledger clean', async () => {
      const result = await ledgerVerifyCli(gw.databaseUrl);
      assert.equal(result.code, 0, result.stdout + result.stderr);
    });
  });
}

describe('gateway.yaml with Anthropic down', { timeout: 60_000 }, () => {
  let upstream: FakeUpstream;
  let gw: TestGateway;
  before(async () => {
    upstream = await startFakeUpstream({ reply: REPLY });
    gw = await startGateway({ config: atFake(rawExample('gateway.yaml'), upstream, ['anthropic']) });
  });
  after(async () => {
    await gw?.close();
    await upstream?.close();
  });

  for (const stream of [false, true]) {
    it(`svc-smart falls back to o3, a reasoning model, which takes what the gateway sends (${stream ? 'stream' : 'JSON'})`, async () => {
      upstream.reset();
      const account = await gw.createAccount({ purchased: 100_000 });
      const client = gw.client(account.key);
      let content = '';
      let svc: Svc | undefined;
      if (!stream) {
        const completion = await client.chat.completions.create({ model: 'svc-smart', messages });
        content = completion.choices[0]!.message.content ?? '';
        svc = svcOf(completion);
      } else {
        for await (const chunk of await client.chat.completions.create({ model: 'svc-smart', messages, stream: true })) {
          content += chunk.choices[0]?.delta.content ?? '';
          svc = (chunk as { svc?: Svc }).svc ?? svc;
        }
      }
      assert.equal(content, REPLY);
      assert.deepEqual([svc?.provider, svc?.routed_model], ['openai', 'o3']);
      const o3 = upstream.requests.filter((r) => r.model === 'o3');
      assert.equal(o3.length, 1, 'o3 served on its first request: it refused nothing');
      const body = o3[0]!.body;
      assert.equal(typeof body.max_completion_tokens, 'number');
      for (const field of ['max_tokens', 'temperature', 'top_p']) assert.ok(!(field in body), `${field} not sent: ${JSON.stringify(body)}`);
      assert.equal((await credits(gw, account.key)).total_credits, 100_000 - svc!.credits_used);
    });
  }
});
