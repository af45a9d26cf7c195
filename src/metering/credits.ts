/** Granting credits and showing accounts and balances: shared by the API, the admin API and the CLI. */
import { isoSeconds } from '../clock.js';
import type { CreditsObject } from '../http/schemas/account.js';
import type { z } from 'zod';
import type { accountList, accountObject as accountObjectSchema, accountWithCredits as accountWithCreditsSchema, CreditGrantObject } from '../http/schemas/admin.js';
import type { Account, Balances, CreditKind, Grant, Store } from '../store/types.js';

const DAY_MS = 86_400_000;

/** A page of `GET /admin/v1/accounts` and `svc-gateway accounts list`. */
export const ACCOUNTS_PAGE = { default: 20, max: 100 } as const;

export type { CreditsObject };
export type AccountObject = z.infer<typeof accountObjectSchema>;
export type AccountWithCredits = z.infer<typeof accountWithCreditsSchema>;
export type AccountsPage = z.infer<typeof accountList>;

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

export function accountObject(account: Account): AccountObject {
  return { id: account.id, object: 'account', name: account.name, created_at: isoSeconds(account.createdAt) };
}

/** The body of `GET /admin/v1/accounts/{id}`. */
export async function accountWithCredits(store: Store, account: Account, now: Date): Promise<AccountWithCredits> {
  return { ...accountObject(account), credits: await accountCredits(store, account.id, now) };
}

/** Accounts in id order after the cursor `after`, each with its balances. */
export async function accountsPage(store: Store, query: { limit: number; after?: string | null }, now: Date): Promise<AccountsPage> {
  const found = await store.listAccounts({ limit: query.limit + 1, after: query.after });
  const data = await Promise.all(found.slice(0, query.limit).map((a) => accountWithCredits(store, a, now)));
  return { object: 'list', data, has_more: found.length > query.limit };
}
