/**
 * Alias → ordered candidates. A plain alias yields its routes; `svc-auto`
 * classifies the prompt and yields the routes of the alias for that class.
 * The breaker moves upstreams that keep failing to the back of the list.
 */
import type { CatalogEntry } from './catalog.js';
import { Catalog } from './catalog.js';
import type { Breaker } from './breaker.js';
import type { PromptClassifier, WhenUnsure } from './auto/classifier.js';
import type { ChatMessage, ProviderAdapter, RouteParams } from '../providers/types.js';
import { routeParams } from './route-params.js';
import type { AutoChoice } from '../http/schemas/chat-completion-response.js';

export interface Candidate {
  /** `provider/model`, the breaker's and the logs' name for it. */
  upstream: string;
  provider: ProviderAdapter;
  model: string;
  /** How this route's model takes parameters. */
  params: RouteParams;
}

export type { AutoChoice };

export interface RoutePlan {
  candidates: Candidate[];
  auto: AutoChoice | null;
}

export class Router {
  constructor(
    private readonly catalog: Catalog,
    private readonly providers: ReadonlyMap<string, ProviderAdapter>,
    private readonly breaker: Breaker,
    private readonly classifier: PromptClassifier,
    /** `auto.when_unsure`: what svc-auto routes to when its classifier is unsure. */
    private readonly whenUnsure: WhenUnsure = 'capable',
  ) {}

  /** `tokensNeeded`: prompt plus the least output the request needs, for svc-auto's choice of window. */
  plan(entry: CatalogEntry, messages: ChatMessage[], tokensNeeded: number): RoutePlan {
    if (!entry.auto) return { candidates: this.candidates(entry), auto: null };
    const classification = this.classifier.classify(messages, this.whenUnsure);
    let cls = classification.class;
    let target = this.catalog.get(entry.auto[cls])!;
    const reasons = [...classification.reasons];
    if (target.contextWindow < tokensNeeded) {
      // The class's alias cannot hold this prompt: step up to one that can.
      const roomier = (['complex', 'code', 'simple'] as const).find((c) => this.catalog.get(entry.auto![c])!.contextWindow >= tokensNeeded);
      if (roomier) {
        reasons.push(`${target.id} cannot hold ${tokensNeeded} tokens → ${roomier}`);
        cls = roomier;
        target = this.catalog.get(entry.auto[cls])!;
      }
    }
    return {
      candidates: this.candidates(target),
      auto: { class: cls, alias: target.id, reasons, probabilities: classification.probabilities },
    };
  }

  /** Every upstream some alias routes to, for the health view. */
  upstreams(): string[] {
    const names = this.catalog.list().flatMap((e) => (e.routes ?? []).map((r) => `${r.provider}/${r.model}`));
    return [...new Set(names)];
  }

  private candidates(entry: CatalogEntry): Candidate[] {
    const candidates = (entry.routes ?? []).map((r) => {
      const provider = this.providers.get(r.provider)!;
      return { upstream: `${r.provider}/${r.model}`, provider, model: r.model, params: routeParams(r) };
    });
    return this.breaker.order(candidates);
  }
}
