/** Issuing a key: one path for the API, the admin API and the CLI. */
import type { ApiKeyRecord, Environment, Store } from '../store/types.js';
import { isoSeconds } from '../clock.js';
import type { ApiKeyObject } from '../http/schemas/account.js';
import { generateApiKey } from './secret.js';

export interface KeyRequest {
  name?: string | null;
  environment?: Environment | null;
  daily_credit_limit?: number | null;
  rate_limit_rpm?: number | null;
}

export async function issueApiKey(store: Store, accountId: string, input: KeyRequest): Promise<{ record: ApiKeyRecord; secret: string }> {
  const environment = input.environment ?? 'live';
  const generated = generateApiKey(environment);
  const record = await store.createApiKey({
    id: generated.id,
    accountId,
    name: input.name ?? null,
    environment,
    dailyCreditLimit: input.daily_credit_limit ?? null,
    rateLimitRpm: input.rate_limit_rpm ?? null,
    redactedKey: generated.redacted,
    salt: generated.salt,
    hash: generated.hash,
  });
  return { record, secret: generated.secret };
}

export type { ApiKeyObject };

/** The key record as the API shows it: never the secret. */
export function apiKeyObject(record: ApiKeyRecord): ApiKeyObject {
  return {
    id: record.id,
    object: 'api_key',
    name: record.name,
    environment: record.environment,
    daily_credit_limit: record.dailyCreditLimit,
    rate_limit_rpm: record.rateLimitRpm,
    redacted_key: record.redactedKey,
    created_at: isoSeconds(record.createdAt),
    last_used_at: record.lastUsedAt ? isoSeconds(record.lastUsedAt) : null,
    credits_spent_today: record.creditsSpentToday,
  };
}

/** The body of `GET /v1/api-keys` and `svc-gateway keys list --json`. */
export function apiKeyList(records: ApiKeyRecord[]): { object: 'list'; data: ApiKeyObject[] } {
  return { object: 'list', data: records.map(apiKeyObject) };
}

/** The answer to revoking a key (`DELETE /v1/api-keys/{id}`, `svc-gateway keys revoke`). */
export function revokedKeyObject(id: string): { id: string; object: 'api_key'; deleted: true } {
  return { id, object: 'api_key', deleted: true };
}
