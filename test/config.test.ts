import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, DEFAULT_CONFIG_SOURCE, loadConfig, loadConfigFile, parseConfig } from '../src/config.js';
import { DatabaseUrlError, isPostgresUrl, openStore, sqlitePath } from '../src/store/open.js';
import { buildProviders } from '../src/providers/registry.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-config-'));

function configWith(change: (c: Record<string, unknown>) => void): unknown {
  const copy = structuredClone(DEFAULT_CONFIG_SOURCE) as unknown as Record<string, unknown>;
  change(copy);
  return copy;
}

function refusal(source: unknown): string {
  try {
    parseConfig(source);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.message;
  }
  return assert.fail('the config was accepted');
}

describe('config', () => {
  it('serves the spec catalog on the simulator when there is no file', () => {
    const config = loadConfig(undefined);
    assert.deepEqual(config.models.map((m) => [m.id, m.context_window, m.pricing.input_credits_per_1k, m.pricing.output_credits_per_1k]), [
      ['svc-auto', 128000, 10, 30], ['svc-fast', 64000, 4, 12], ['svc-code', 128000, 12, 40], ['svc-smart', 128000, 25, 75],
    ]);
    assert.deepEqual(config.providers.map((p) => p.type), ['simulator']);
    assert.equal(config.routing.first_byte_timeout_ms, 15000);
    assert.deepEqual(config.routing.breaker, { failures: 5, cooldown_ms: 30000 });
  });

  it('reads the contract example in YAML, and JSON too', () => {
    const yaml = `
providers:
  - id: openai
    type: openai
    base_url: https://api.openai.com/v1
    api_key_env: OPENAI_API_KEY
models:
  - id: svc-fast
    name: SVC Fast
    description: Low latency
    context_window: 64000
    pricing: { input_credits_per_1k: 4, output_credits_per_1k: 12 }
    routes:
      - { provider: openai, model: gpt-4o-mini }
routing:
  first_byte_timeout_ms: 15000
  hedge_after_ms: 3000
  breaker: { failures: 5, cooldown_ms: 30000 }
`;
    writeFileSync(join(dir, 'gateway.yaml'), yaml);
    const fromYaml = loadConfigFile(join(dir, 'gateway.yaml'));
    assert.equal(fromYaml.routing.hedge_after_ms, 3000);
    assert.deepEqual(fromYaml.models[0]!.routes, [{ provider: 'openai', model: 'gpt-4o-mini' }]);
    writeFileSync(join(dir, 'gateway.json'), JSON.stringify(fromYaml));
    assert.deepEqual(loadConfigFile(join(dir, 'gateway.json')), fromYaml);
  });

  it('names the field of every refusal', () => {
    assert.match(refusal(configWith((c) => {
      (c.models as Array<{ routes?: Array<{ provider: string }> }>)[1]!.routes![0]!.provider = 'opnai';
    })), /models\[1\]\.routes\[0\]\.provider: unknown provider 'opnai'/);
    assert.match(refusal(configWith((c) => {
      (c.models as Array<{ pricing: { input_credits_per_1k: unknown } }>)[2]!.pricing.input_credits_per_1k = 1.5;
    })), /models\[2\]\.pricing\.input_credits_per_1k/);
    assert.match(refusal(configWith((c) => {
      (c.models as Array<{ auto?: Record<string, string> }>)[0]!.auto!.code = 'svc-nope';
    })), /models\[0\]\.auto\.code: 'svc-nope' is not a model with routes/);
    assert.match(refusal(configWith((c) => { c.providers = [{ id: 'x', type: 'openai' }]; })), /providers\[0\]\.base_url: required/);
    assert.match(refusal(configWith((c) => { c.providers = [{ id: 'g', type: 'gemini', anthropic_version: '2023-06-01' }]; })),
      /providers\[0\]\.anthropic_version: only for an anthropic provider/);
    assert.match(refusal(configWith((c) => {
      c.providers = [{ id: 'sim', type: 'simulator' }];
      (c.models as Array<{ routes?: Array<Record<string, unknown>> }>)[1]!.routes = [{ provider: 'sim', model: 'm', continue: true }];
    })), /models\[1\]\.routes\[0\]\.continue: only for openai providers/);
    assert.match(refusal(configWith((c) => { c.routing = { first_byte_timeout_ms: -1 }; })), /routing\.first_byte_timeout_ms/);
    assert.match(refusal(configWith((c) => { c.models = []; })), /^.*\n\s+models:/);
    assert.match(refusal(configWith((c) => { c.providers = [{ id: 'x', type: 'openai', base_url: 'ftp://example.com/v1' }]; })),
      /providers\[0\]\.base_url: must be an http:\/\/ or https:\/\/ URL/);
  });

  it("takes auto.when_unsure: capable by default, cheap when set, and refuses anything else", () => {
    assert.equal(loadConfig(undefined).auto.when_unsure, 'capable');
    assert.equal(parseConfig(configWith((c) => { c.auto = {}; })).auto.when_unsure, 'capable');
    assert.equal(parseConfig(configWith((c) => { c.auto = { when_unsure: 'cheap' }; })).auto.when_unsure, 'cheap');
    assert.match(refusal(configWith((c) => { c.auto = { when_unsure: 'smart' }; })), /auto\.when_unsure: must be 'capable' or 'cheap'/);
    assert.match(refusal(configWith((c) => { c.auto = { when_unsur: 'cheap' }; })), /auto: .*when_unsur/);
  });

  it('bounds slow clients by default, and takes a partial server section', () => {
    assert.deepEqual(loadConfig(undefined).server, {
      request_timeout_ms: 30_000, headers_timeout_ms: 10_000, keep_alive_timeout_ms: 5_000, connection_timeout_ms: 0, max_connections: 10_000,
    });
    const partial = parseConfig(configWith((c) => { c.server = { keep_alive_timeout_ms: 65_000, max_connections: 500 }; }));
    assert.deepEqual(partial.server, {
      request_timeout_ms: 30_000, headers_timeout_ms: 10_000, keep_alive_timeout_ms: 65_000, connection_timeout_ms: 0, max_connections: 500,
    });
    // A request timeout under the headers' default takes the headers' along.
    assert.equal(parseConfig(configWith((c) => { c.server = { request_timeout_ms: 4_000 }; })).server.headers_timeout_ms, 4_000);
  });

  it('logs no prompts unless logging.prompts is true, and refuses anything else there', () => {
    assert.deepEqual(loadConfig(undefined).logging, { prompts: false });
    assert.equal(parseConfig(configWith((c) => { c.logging = { prompts: true }; })).logging.prompts, true);
    assert.match(refusal(configWith((c) => { c.logging = { prompts: 'yes' }; })), /logging\.prompts/);
    assert.match(refusal(configWith((c) => { c.logging = { prompt: true }; })), /logging/);
  });

  it('names the field of a bad server setting', () => {
    const withServer = (server: Record<string, unknown>) => refusal(configWith((c) => { c.server = server; }));
    assert.match(withServer({ request_timeout_ms: 0 }), /server\.request_timeout_ms/);
    assert.match(withServer({ headers_timeout_ms: 1.5 }), /server\.headers_timeout_ms/);
    assert.match(withServer({ keep_alive_timeout_ms: 3_000_000_000 }), /server\.keep_alive_timeout_ms/);
    assert.match(withServer({ connection_timeout_ms: -1 }), /server\.connection_timeout_ms/);
    assert.match(withServer({ max_connections: 0 }), /server\.max_connections/);
    assert.match(withServer({ max_connections: '100' }), /server\.max_connections/);
    assert.match(withServer({ request_timeout_ms: 5_000, headers_timeout_ms: 6_000 }),
      /server\.headers_timeout_ms: must not be more than request_timeout_ms/);
  });

  it('refuses at boot a provider whose key variable is not set', () => {
    const config = parseConfig({ ...(structuredClone(DEFAULT_CONFIG_SOURCE) as object),
      providers: [{ id: 'simulator', type: 'simulator' }, { id: 'up', type: 'openai', base_url: 'http://127.0.0.1:1/v1', api_key_env: 'SVC_TEST_UNSET_KEY' }] });
    assert.throws(() => buildProviders(config.providers, {}), /providers\[1\]\.api_key_env: the variable SVC_TEST_UNSET_KEY is not set/);
    const built = buildProviders(config.providers, { SVC_TEST_UNSET_KEY: 'sk-x' });
    assert.deepEqual([...built.adapters.keys()], ['simulator', 'up']);
    void built.close();
  });

  it('says which file is unreadable or not YAML', () => {
    assert.throws(() => loadConfigFile(join(dir, 'missing.yaml')), /cannot read config file .*missing\.yaml/);
    writeFileSync(join(dir, 'broken.yaml'), 'providers: [\n');
    assert.throws(() => loadConfigFile(join(dir, 'broken.yaml')), /is not valid YAML or JSON/);
  });
});

describe('DATABASE_URL', () => {
  it('takes the three sqlite spellings and refuses the rest', () => {
    assert.equal(sqlitePath('sqlite:/var/lib/svc/gateway.db'), '/var/lib/svc/gateway.db');
    assert.equal(sqlitePath('sqlite:///var/lib/svc/gateway.db'), '/var/lib/svc/gateway.db');
    assert.equal(sqlitePath('sqlite:./data/gateway.db'), join(process.cwd(), 'data/gateway.db'));
    assert.equal(sqlitePath('postgres://localhost/x'), null);
    assert.throws(() => sqlitePath('sqlite:'), DatabaseUrlError);
    assert.throws(() => openStore('mysql://localhost/x'), /must start with sqlite: or postgres:\/\//);
    assert.ok(isPostgresUrl('postgres://h/x') && isPostgresUrl('postgresql://h/x') && !isPostgresUrl('sqlite:./x.db'));
  });
});
