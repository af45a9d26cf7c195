/** Builds one adapter per configured provider. */
import { ConfigError, type ProviderConfig } from '../config.js';
import { createAnthropicAdapter } from './anthropic.js';
import { createGeminiAdapter } from './gemini.js';
import { createOpenAiAdapter } from './openai.js';
import { createSimulatorAdapter } from './simulator.js';
import type { ProviderAdapter } from './types.js';

export interface ProviderSet {
  adapters: ReadonlyMap<string, ProviderAdapter>;
  close(): Promise<void>;
}

/** `env` supplies each provider's key by the variable its `api_key_env` names. */
export function buildProviders(providers: ProviderConfig[], env: Readonly<Record<string, string | undefined>>): ProviderSet {
  const adapters = new Map<string, ProviderAdapter>();
  const closers: Array<() => Promise<void>> = [];
  providers.forEach((p, i) => {
    const apiKey = p.api_key_env ? env[p.api_key_env] : undefined;
    if (p.api_key_env && !apiKey) {
      throw new ConfigError(`config is invalid:\n  providers[${i}].api_key_env: the variable ${p.api_key_env} is not set`);
    }
    const adapter = buildAdapter(p, apiKey);
    adapters.set(p.id, adapter);
    if (adapter.close) closers.push(adapter.close.bind(adapter));
  });
  return { adapters, close: async () => void (await Promise.all(closers.map((c) => c()))) };
}

function buildAdapter(p: ProviderConfig, apiKey: string | undefined): ProviderAdapter & { close?(): Promise<void> } {
  const common = { id: p.id, apiKey, connections: p.connections };
  switch (p.type) {
    case 'openai': return createOpenAiAdapter({ ...common, baseUrl: p.base_url! });
    case 'anthropic': return createAnthropicAdapter({ ...common, baseUrl: p.base_url, version: p.anthropic_version });
    case 'gemini': return createGeminiAdapter({ ...common, baseUrl: p.base_url });
    case 'simulator': return createSimulatorAdapter(p.id);
  }
}
