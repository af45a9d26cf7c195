/**
 * The metering arithmetic, pure. All amounts are integer credits; prices are
 * credits per 1,000 tokens, and every division rounds up so that a request is
 * never billed less than its tokens cost.
 */
import type { Pricing } from '../config.js';
import type { ReservationDecision, ReservationPlanner } from '../store/types.js';

/** Output tokens a reservation claims when the caller sets no `max_tokens`. */
export const DEFAULT_MAX_OUTPUT = 4096;

export function creditsFor(promptTokens: number, completionTokens: number, pricing: Pricing): number {
  return Math.ceil((promptTokens * pricing.input_credits_per_1k + completionTokens * pricing.output_credits_per_1k) / 1000);
}

/** The most output tokens `budget` credits pay for after the prompt; -1 when not even the prompt. */
export function affordableOutputTokens(budget: number, promptTokens: number, pricing: Pricing): number {
  const left = budget * 1000 - promptTokens * pricing.input_credits_per_1k;
  if (left < 0) return -1;
  if (pricing.output_credits_per_1k === 0) return Number.MAX_SAFE_INTEGER;
  return Math.floor(left / pricing.output_credits_per_1k);
}

export interface ReservationInput {
  promptTokens: number;
  /** The caller's `max_tokens`, or null to let the gateway choose. */
  maxTokens: number | null;
  contextWindow: number;
  pricing: Pricing;
}

/**
 * The reservation policy of the contract: an explicit `max_tokens` is reserved
 * whole or refused; otherwise the output is clamped to the smallest of 4096,
 * the context left, and what the credits and the key's cap afford.
 */
export function planReservation(input: ReservationInput): ReservationPlanner {
  const { promptTokens, maxTokens, contextWindow, pricing } = input;
  return ({ available, capRemaining }): ReservationDecision => {
    const creditOutput = affordableOutputTokens(available, promptTokens, pricing);
    const capOutput = capRemaining === null ? Number.MAX_SAFE_INTEGER : affordableOutputTokens(capRemaining, promptTokens, pricing);

    if (maxTokens !== null) {
      const amount = creditsFor(promptTokens, maxTokens, pricing);
      if (capRemaining !== null && amount > capRemaining) {
        return dailyCap(`This request may cost ${amount} credits (${promptTokens} prompt tokens + max_tokens ${maxTokens}), ` +
          `but this key's daily credit limit leaves ${capRemaining} today.`);
      }
      if (amount > available) {
        const affordable = Math.max(0, creditOutput);
        return insufficient(`This request may cost ${amount} credits (${promptTokens} prompt tokens + max_tokens ${maxTokens}), ` +
          `but the account has ${available} credits available: it can afford max_tokens of at most ${affordable}.`);
      }
      return { ok: true, amount, maxOutput: maxTokens };
    }

    if (capOutput < 1) {
      return dailyCap(`This key's daily credit limit leaves ${capRemaining ?? 0} credits today, ` +
        `not enough for the ${promptTokens}-token prompt and one output token.`);
    }
    if (creditOutput < 1) {
      return insufficient(`The account has ${available} credits available, ` +
        `not enough for the ${promptTokens}-token prompt and one output token.`);
    }
    const maxOutput = Math.min(DEFAULT_MAX_OUTPUT, contextWindow - promptTokens, creditOutput, capOutput);
    return { ok: true, amount: creditsFor(promptTokens, maxOutput, pricing), maxOutput };
  };
}

function insufficient(message: string): ReservationDecision {
  return { ok: false, reason: 'insufficient_credits', message };
}

function dailyCap(message: string): ReservationDecision {
  return { ok: false, reason: 'daily_cap', message };
}
