/**
 * The end of a request's life in the ledger: what to bill (the upstream's
 * usage, believed within bounds, else the gateway's own count), the charge
 * (retried while the lease keeps the hold), the `svc` metadata, and the release
 * of a request that delivered nothing.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../clock.js';
import type { GatewayError } from '../errors.js';
import { creditsFor } from '../metering/pricing.js';
import { countTextTokens } from '../metering/tokens.js';
import type { TokenUsage } from '../providers/types.js';
import type { Delivered, SettleRequest, SettleResult, Store, StoredResponse } from '../store/types.js';
import type { Answer } from './answer.js';
import type { ChatCompletion, StoredCompletion, Svc } from './chat-types.js';
import type { Admission } from './completion.js';
import type { Candidate } from './router.js';

/** Upstream prompt counts are believed up to this multiple of the gateway's estimate (plus the slack): tokenizers differ, not tenfold. */
const PROMPT_TRUST = 2;
const PROMPT_SLACK = 64;

/** A settlement the database refused is tried this many times (each already waits out a busy lock), this far apart. */
const SETTLE_ATTEMPTS = 3;
const SETTLE_RETRY_MS = 250;

export interface SettlementDeps {
  store: Store;
  clock: Clock;
}

export class Settlement {
  constructor(private readonly deps: SettlementDeps) {}

  /**
   * Charges the request. The lease keeps the hold alive while the database is
   * asked again; if it still refuses, the lease's last record of what was
   * delivered stays for a sweeper to settle (a stream's delivered content is
   * never released unpaid). With an Idempotency-Key, `respond` builds the stored
   * response inside the settling transaction.
   */
  async settle(
    admission: Admission, routes: Candidate[], tokens: TokenUsage, arrivedAt: number, respond: (svc: Svc) => StoredResponse,
  ): Promise<Svc> {
    const candidate = routes.at(-1)!;
    let svc: Svc | null = null;
    const svcOf = (result: SettleResult): Svc => (svc = this.svc(admission, routes, result, arrivedAt));
    const result = await this.settleDurably(admission, {
      reservationId: admission.reservationId,
      credits: creditsFor(tokens.promptTokens, tokens.completionTokens, admission.entry.pricing),
      promptTokens: tokens.promptTokens, completionTokens: tokens.completionTokens, routedModel: candidate.model,
      ...(admission.idempotent && { respond: (settled: SettleResult) => respond(svcOf(settled)) }),
    });
    admission.trace.settled(result, tokens);
    return svc ?? svcOf(result);
  }

  private async settleDurably(admission: Admission, request: SettleRequest): Promise<SettleResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await this.deps.store.settle(request);
        admission.lease.stop();
        return result;
      } catch (err) {
        if (attempt >= SETTLE_ATTEMPTS) {
          await admission.lease.renew().catch(() => false);
          admission.lease.stop();
          admission.trace.abandoned();
          throw err;
        }
        await sleep(SETTLE_RETRY_MS * attempt);
      }
    }
  }

  /** The metering metadata; `routes` is every route that contributed, the last the one that finished. */
  private svc(admission: Admission, routes: Candidate[], result: SettleResult, arrivedAt: number): Svc {
    const candidate = routes.at(-1)!;
    return {
      requested_model: admission.entry.id,
      routed_model: candidate.model,
      credits_used: result.charged,
      balance_remaining: result.balanceRemaining,
      latency_ms: Math.max(0, Math.round(this.deps.clock.now().getTime() - arrivedAt)),
      provider: candidate.provider.id,
      ...(admission.plan.auto ? { auto: admission.plan.auto } : {}),
      ...(routes.length > 1 && { routes: routes.map((r) => ({ provider: r.provider.id, model: r.model })) }),
    };
  }

  /** What a stream has delivered so far, as a sweeper would charge it. */
  delivered(admission: Admission, candidate: Candidate, answer: Answer): Delivered {
    const tokens = this.meteredUsage(admission, null, answer.outputText);
    return {
      credits: creditsFor(tokens.promptTokens, tokens.completionTokens, admission.entry.pricing),
      promptTokens: tokens.promptTokens, completionTokens: tokens.completionTokens, routedModel: candidate.model,
    };
  }

  /** A completion as kept under an Idempotency-Key: a stream that failed midway keeps the error that ended it. */
  stored(completion: ChatCompletion, failure: GatewayError | null): StoredCompletion {
    return failure ? { ...completion, error: failure.toBody().error } : completion;
  }

  async release(admission: Admission): Promise<void> {
    admission.lease.stop();
    // If even this fails, the lease lapses and the sweeper releases the hold.
    await this.deps.store.release(admission.reservationId).then(
      () => admission.trace.released(),
      () => admission.trace.abandoned(),
    );
  }

  /**
   * The tokens to bill: the upstream's count when it gave one, else the
   * gateway's own. Never more output than the `max_tokens` sent, nor a prompt
   * far beyond the gateway's estimate: a broken upstream cannot drain an account.
   */
  meteredUsage(admission: Admission, reported: TokenUsage | null, output: string): TokenUsage {
    const usage = reported ?? { promptTokens: admission.promptTokens, completionTokens: countTextTokens(output, admission.maxOutput) };
    const promptTokens = Math.min(usage.promptTokens, admission.promptTokens * PROMPT_TRUST + PROMPT_SLACK);
    const completionTokens = Math.min(usage.completionTokens, admission.maxOutput);
    // The details are parts of the two counts, never more than them.
    return {
      promptTokens, completionTokens,
      ...(usage.cachedTokens !== undefined && { cachedTokens: Math.min(usage.cachedTokens, promptTokens) }),
      ...(usage.reasoningTokens !== undefined && { reasoningTokens: Math.min(usage.reasoningTokens, completionTokens) }),
    };
  }
}
