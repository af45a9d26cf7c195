/**
 * Bearer-key authentication. The key id inside the secret finds the record
 * (no scan); the salted hash is compared in constant time; a revoked key is
 * refused on the very next request because every request reads the record.
 */
import { timingSafeEqual, createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { Clock } from '../clock.js';
import { errors } from '../errors.js';
import { parseApiKey, verifySecret } from '../keys/secret.js';
import type { Store, StoredApiKey } from '../store/types.js';

export interface AuthenticatedKey {
  accountId: string;
  keyId: string;
  key: StoredApiKey;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller: AuthenticatedKey | null;
    arrivedAt: number;
  }
}

export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}

export async function authenticateKey(store: Store, clock: Clock, request: FastifyRequest): Promise<AuthenticatedKey> {
  const token = bearerToken(request);
  if (token === null) {
    throw errors.invalidApiKey('Missing API key. Send "Authorization: Bearer <key>" with a key of this gateway.');
  }
  const parsed = parseApiKey(token);
  if (!parsed) throw errors.invalidApiKey();
  const key = await store.findApiKey(parsed.id);
  if (!key || key.environment !== parsed.environment || !verifySecret(token, key.salt, key.hash)) throw errors.invalidApiKey();
  if (key.revokedAt !== null) throw errors.apiKeyRevoked();
  // The record says when it was last touched: write only when that is stale.
  if (key.lastUsedAt === null || clock.now().getTime() - key.lastUsedAt.getTime() >= 60_000) await store.touchApiKey(key.id);
  return { accountId: key.accountId, keyId: key.id, key };
}

/** Constant-time comparison of the admin token (hashed first so lengths match). */
export function isAdminToken(request: FastifyRequest, adminToken: string): boolean {
  const token = bearerToken(request);
  if (token === null) return false;
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(token), digest(adminToken));
}
