/** Granting credits and showing balances: shared by the API, the admin API and the CLI. */
import { isoSeconds } from '../clock.js';
import type { CreditsObject } from '../http/schemas/account.js';
import type { CreditGrantObject } from '../http/schemas/admin.js';
import type { Balances, CreditKind, Grant, Store } from '../store/types.js';

const DAY_MS = 86_400_000;

export interface GrantInput {
  kind: CreditKind;
  amount: number;
  expiresAt: Date | null;
}

/** Why a grant is refused, or null when it is sound. Earned credits expire; purchased never do. */
export function grantProblem(input: GrantInput): { param: string; message: string } | null {
  if (!Number.isSafeInteger(input.amount) || input.amount <= 0) {
    return { param: 'amount', message: 'amount must be a positive integer' };
  }
  if (input.kind === 'earned' && input.expiresAt === null) {
    return { param: 'expires_at', message: 'earned credits need expires_at' };
  }
  if (input.kind === 'purchased' && input.expiresAt !== null) {
    return { param: 'expires_at', message: 'purchased credits do not expire: omit expires_at' };
  }
  return null;
}

export function grantObject(grant: Grant): CreditGrantObject {
  return {
    id: grant.id,
    object: 'credit_grant',
    account_id: grant.accountId,
    kind: grant.kind,
    amount: grant.amount,
    expires_at: grant.expiresAt ? isoSeconds(grant.expiresAt) : null,
    created_at: isoSeconds(grant.createdAt),
  };
}

/** The body of GET /v1/credits. */
export function creditsObject(accountId: string, balances: Balances, now: Date): CreditsObject {
  const total = balances.earned + balances.purchased;
  const expiresAt = balances.earnedExpiresAt;
  return {
    account_id: accountId,
    total_credits: total,
    earned_credits: {
      balance: balances.earned,
      expires_at: expiresAt ? isoSeconds(expiresAt) : null,
      days_remaining: expiresAt ? Math.max(0, Math.ceil((expiresAt.getTime() - now.getTime()) / DAY_MS)) : 0,
    },
    purchased_credits: { balance: balances.purchased, expires_at: null },
    currency: 'SVC_CREDITS',
    reserved_credits: balances.reserved,
    available_credits: total - balances.reserved,
  };
}

export async function accountCredits(store: Store, accountId: string, now: Date): Promise<CreditsObject> {
  return creditsObject(accountId, await store.balances(accountId), now);
}
