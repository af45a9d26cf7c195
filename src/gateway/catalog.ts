/** The model aliases the gateway serves, as the config declares them. */
import type { GatewayConfig, ModelConfig, Pricing, RouteConfig } from '../config.js';
import type { ModelObject } from '../http/schemas/account.js';

export interface CatalogEntry {
  id: string;
  name: string;
  description: string;
  contextWindow: number;
  pricing: Pricing;
  routes: RouteConfig[] | null;
  auto: { simple: string; code: string; complex: string } | null;
}

/** Unix seconds the aliases report as OpenAI's `created`: the gateway's first release. */
const CATALOG_CREATED = 1_763_683_200;

export class Catalog {
  private readonly entries: Map<string, CatalogEntry>;

  constructor(config: GatewayConfig) {
    this.entries = new Map(config.models.map((m) => [m.id, toEntry(m)]));
  }

  get(id: string): CatalogEntry | undefined {
    return this.entries.get(id);
  }

  list(): CatalogEntry[] {
    return [...this.entries.values()];
  }
}

function toEntry(m: ModelConfig): CatalogEntry {
  return {
    id: m.id, name: m.name, description: m.description, contextWindow: m.context_window, pricing: m.pricing,
    routes: m.routes ?? null, auto: m.auto ?? null,
  };
}

/** The catalog entry as `GET /v1/models` shows it. */
export function modelObject(entry: CatalogEntry): ModelObject {
  return {
    id: entry.id,
    object: 'model',
    created: CATALOG_CREATED,
    owned_by: 'svc-gateway',
    name: entry.name,
    context_window: entry.contextWindow,
    pricing: { ...entry.pricing },
    description: entry.description,
  };
}
