/** Builds one adapter per configured provider. */
import { ConfigError, type ProviderConfig } from '../config.js';
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
    if (p.type === 'openai') {
      const adapter = createOpenAiAdapter({
        id: p.id,
        baseUrl: p.base_url!,
        apiKey,
        connections: p.connections,
      });
      adapters.set(p.id, adapter);
      closers.push(() => adapter.close());
    } else if (p.type === 'simulator') {
      adapters.set(p.id, createSimulatorAdapter(p.id));
    } else {
      throw new ConfigError(`config is invalid:\n  providers[${i}].type: provider type ${p.type} is not supported`);
    }
  });
  return { adapters, close: async () => void (await Promise.all(closers.map((c) => c()))) };
}
