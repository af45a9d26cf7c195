/**
 * The config file's schema and its one loader. Parsed once at boot; nothing
 * else reads files or `process.env` for settings.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

const pricingSchema = z.object({
  input_credits_per_1k: z.number().int().nonnegative(),
  output_credits_per_1k: z.number().int().nonnegative(),
});

const providerSchema = z.object({
  id: z.string().min(1),
  type: z.enum(['openai', 'anthropic', 'gemini', 'simulator']),
  base_url: z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' }).optional(),
  api_key_env: z.string().min(1).optional(),
  /**
   * Most open connections to this provider (undici pool size). A streamed answer holds its socket
   * for its whole length, so the pool must hold every completion in flight (and its hedge): a smaller
   * one queues requests behind long streams until they fail their first-byte timeout.
   */
  connections: z.number().int().positive().default(4096),
  /** anthropic only: the `anthropic-version` header. */
  anthropic_version: z.string().min(1).optional(),
});

/** Where a provider type lives when its `base_url` is left out (an `openai` provider must name its server). */
export const DEFAULT_BASE_URLS: Partial<Record<ProviderType, string>> = {
  anthropic: 'https://api.anthropic.com',
  gemini: 'https://generativelanguage.googleapis.com',
};

export type ProviderType = 'openai' | 'anthropic' | 'gemini' | 'simulator';

/** Request fields (OpenAI's wire names) a route may declare its model refuses. */
export const REFUSABLE_FIELDS = ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty', 'seed', 'stop'] as const;

const routeSchema = z.object({
  provider: z.string().min(1),
  model: z.string().min(1),
  /** OpenAI-compatible routes only: the server continues a final assistant turn (vLLM's continue_final_message). */
  continue: z.boolean().optional(),
  /** How the model takes parameters; absent fields take the built-in defaults for its family. */
  params: z.object({
    max_tokens_field: z.enum(['max_tokens', 'max_completion_tokens']).optional(),
    refuses: z.array(z.enum(REFUSABLE_FIELDS)).optional(),
  }).optional(),
});

const modelSchema = z
  .object({
    id: z.string().min(1),
    name: z.string().min(1),
    description: z.string().default(''),
    context_window: z.number().int().positive(),
    pricing: pricingSchema,
    routes: z.array(routeSchema).min(1).optional(),
    auto: z.object({ simple: z.string(), code: z.string(), complex: z.string() }).optional(),
  })
  .refine((m) => (m.routes === undefined) !== (m.auto === undefined), {
    message: 'a model needs exactly one of `routes` or `auto`',
  });

const routingSchema = z
  .object({
    first_byte_timeout_ms: z.number().int().positive().default(15_000),
    hedge_after_ms: z.number().int().positive().optional(),
    breaker: z
      .object({ failures: z.number().int().positive().default(5), cooldown_ms: z.number().int().positive().default(30_000) })
      .default({ failures: 5, cooldown_ms: 30_000 }),
    /** After the first content, no content or usage event for this long: the route failed (pings and comments are not progress). */
    stream_idle_timeout_ms: z.number().int().positive().default(60_000),
    /** A whole request, from its arrival to its last byte. */
    max_request_ms: z.number().int().positive().default(600_000),
  })
  .default({ first_byte_timeout_ms: 15_000, breaker: { failures: 5, cooldown_ms: 30_000 }, stream_idle_timeout_ms: 60_000, max_request_ms: 600_000 });

/** What the completion log line may carry beyond ids, counts and timings. */
const loggingSchema = z
  .object({
    /** Log each completion's messages (the prompt). Off by default: prompts are the callers' data. */
    prompts: z.boolean().default(false),
  })
  .strict()
  .default({ prompts: false });

const limitsSchema = z
  .object({
    /** Completions in flight before new ones get 503 overloaded. */
    max_in_flight: z.number().int().positive().default(2048),
  })
  .default({ max_in_flight: 2048 });

/** Node's timers hold at most this; a larger socket timeout would silently become 1 ms. */
const MAX_TIMER_MS = 2_147_483_647;
const serverMs = (fallback: number) => z.number().int().positive().max(MAX_TIMER_MS).default(fallback);

/** The listening socket's limits against slow and idle clients (slowloris). */
const serverSchema = z
  .object({
    /** Receiving a whole request, headers and body; answering it may take longer. */
    request_timeout_ms: serverMs(30_000),
    /**
     * Receiving the request line and headers, from the connection's opening (on a kept-alive one, the
     * request's first byte). Default 10 s, or request_timeout_ms when that is shorter.
     */
    headers_timeout_ms: z.number().int().positive().max(MAX_TIMER_MS).optional(),
    /** An idle connection between requests is closed after this. */
    keep_alive_timeout_ms: serverMs(5_000),
    /** A socket with no traffic either way for this long is closed; 0 = never (answers may be long silences). */
    connection_timeout_ms: z.number().int().nonnegative().max(MAX_TIMER_MS).default(0),
    /** Open connections beyond this are closed as they arrive. */
    max_connections: z.number().int().positive().default(10_000),
  })
  .refine((s) => s.headers_timeout_ms === undefined || s.headers_timeout_ms <= s.request_timeout_ms, {
    path: ['headers_timeout_ms'], message: 'must not be more than request_timeout_ms',
  })
  .transform(({ headers_timeout_ms, ...s }) => ({ ...s, headers_timeout_ms: headers_timeout_ms ?? Math.min(10_000, s.request_timeout_ms) }))
  .default({ request_timeout_ms: 30_000, headers_timeout_ms: 10_000, keep_alive_timeout_ms: 5_000, connection_timeout_ms: 0, max_connections: 10_000 });

/** svc-auto's classifier settings. */
const autoSchema = z
  .object({
    /**
     * When the classifier's top two classes are close: `capable` routes to the more capable
     * (dearer) of the two, `cheap` to the cheaper; price order simple < code < complex.
     */
    when_unsure: z.enum(['capable', 'cheap'], { error: "must be 'capable' or 'cheap'" }).default('capable'),
  })
  .strict()
  .default({ when_unsure: 'capable' });

export const configSchema = z
  .object({
    providers: z.array(providerSchema).min(1),
    models: z.array(modelSchema).min(1),
    routing: routingSchema,
    limits: limitsSchema,
    server: serverSchema,
    logging: loggingSchema,
    auto: autoSchema,
  })
  .superRefine(checkReferences);

export type GatewayConfig = z.infer<typeof configSchema>;
export type ProviderConfig = z.infer<typeof providerSchema>;
export type ModelConfig = z.infer<typeof modelSchema>;
export type RouteConfig = z.infer<typeof routeSchema>;
export type Pricing = z.infer<typeof pricingSchema>;

function checkReferences(config: { providers: ProviderConfig[]; models: ModelConfig[] }, ctx: z.RefinementCtx): void {
  const providerIds = new Set<string>();
  config.providers.forEach((p, i) => {
    if (providerIds.has(p.id)) ctx.addIssue({ code: 'custom', path: ['providers', i, 'id'], message: `duplicate provider id '${p.id}'` });
    providerIds.add(p.id);
    if (p.type === 'openai' && p.base_url === undefined) {
      ctx.addIssue({ code: 'custom', path: ['providers', i, 'base_url'], message: 'required for an openai provider' });
    }
    if (p.anthropic_version !== undefined && p.type !== 'anthropic') {
      ctx.addIssue({ code: 'custom', path: ['providers', i, 'anthropic_version'], message: 'only for an anthropic provider' });
    }
  });
  const modelIds = new Map<string, ModelConfig>();
  config.models.forEach((m, i) => {
    if (modelIds.has(m.id)) ctx.addIssue({ code: 'custom', path: ['models', i, 'id'], message: `duplicate model id '${m.id}'` });
    modelIds.set(m.id, m);
  });
  config.models.forEach((m, i) => {
    m.routes?.forEach((r, j) => {
      const provider = config.providers.find((p) => p.id === r.provider);
      if (!provider) {
        ctx.addIssue({ code: 'custom', path: ['models', i, 'routes', j, 'provider'], message: `unknown provider '${r.provider}'` });
      } else if (r.continue !== undefined && provider.type !== 'openai') {
        // Anthropic always continues a final assistant turn; Gemini and the simulator never do.
        ctx.addIssue({ code: 'custom', path: ['models', i, 'routes', j, 'continue'], message: `only for openai providers (an ${provider.type} route decides itself)` });
      }
    });
    if (m.auto) {
      for (const cls of ['simple', 'code', 'complex'] as const) {
        const target = modelIds.get(m.auto[cls]);
        if (!target || !target.routes) {
          ctx.addIssue({ code: 'custom', path: ['models', i, 'auto', cls], message: `'${m.auto[cls]}' is not a model with routes` });
        }
      }
    }
  });
}

/** The config a fresh clone runs with: the spec's catalog on the built-in simulator. */
export const DEFAULT_CONFIG_SOURCE = {
  providers: [{ id: 'simulator', type: 'simulator' }],
  models: [
    {
      id: 'svc-auto', name: 'SVC Auto', context_window: 128_000,
      description: 'Picks cost/intelligence automatically from prompt complexity',
      pricing: { input_credits_per_1k: 10, output_credits_per_1k: 30 },
      auto: { simple: 'svc-fast', code: 'svc-code', complex: 'svc-smart' },
    },
    {
      id: 'svc-fast', name: 'SVC Fast', context_window: 64_000,
      description: 'Low latency: autocomplete, classification, summarization',
      pricing: { input_credits_per_1k: 4, output_credits_per_1k: 12 },
      routes: [{ provider: 'simulator', model: 'sim-fast-1' }],
    },
    {
      id: 'svc-code', name: 'SVC Code', context_window: 128_000,
      description: 'Code generation, debugging, multi-file reasoning',
      pricing: { input_credits_per_1k: 12, output_credits_per_1k: 40 },
      routes: [{ provider: 'simulator', model: 'sim-code-1' }],
    },
    {
      id: 'svc-smart', name: 'SVC Smart', context_window: 128_000,
      description: 'Complex reasoning, math, multi-step planning',
      pricing: { input_credits_per_1k: 25, output_credits_per_1k: 75 },
      routes: [{ provider: 'simulator', model: 'sim-smart-1' }],
    },
  ],
};

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Validates a parsed config object; the error names every bad field by its path. */
export function parseConfig(source: unknown, origin = 'config'): GatewayConfig {
  const result = configSchema.safeParse(source);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => `  ${formatPath(issue.path)}: ${issue.message}`);
  throw new ConfigError(`${origin} is invalid:\n${lines.join('\n')}`);
}

function formatPath(path: PropertyKey[]): string {
  if (path.length === 0) return '(root)';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`)).join('');
}

/** Reads a YAML or JSON file (YAML is a superset of JSON) and validates it. */
export function loadConfigFile(path: string): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (err) {
    throw new ConfigError(`config file ${path} is not valid YAML or JSON: ${(err as Error).message}`);
  }
  return parseConfig(parsed, `config file ${path}`);
}

export function loadConfig(path: string | undefined): GatewayConfig {
  return path ? loadConfigFile(path) : parseConfig(DEFAULT_CONFIG_SOURCE, 'built-in default config');
}
