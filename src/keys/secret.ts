/**
 * API key secrets: their format, generation, hashing and constant-time verification.
 *
 * A secret reads `svc_<env>_<keyid><random>`:
 * - `<env>` is `live` or `test`;
 * - `<keyid>` is 16 base62 characters; the key's record id is `key_<keyid>`, so a
 *   presented secret leads straight to its record without scanning;
 * - `<random>` is 32 base62 characters drawn from `crypto.randomBytes` by rejection
 *   sampling (no modulo bias): 32 × log2(62) ≈ 190 bits of randomness.
 *
 * At rest only a salted hash is kept. The hash is HMAC-SHA256 over the whole secret
 * string, keyed by the salt (the salt's hex text, as UTF-8), written as lowercase hex.
 * Nothing here logs or throws on a presented secret.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '../ids.js';
import type { Environment } from '../store/types.js';


/** The key's environment, as the store records it. */
export type KeyEnvironment = Environment;

export interface GeneratedApiKey {
  /** The record id, `key_<keyid>`. */
  id: string;
  /** The whole secret; shown to the caller once and never stored. */
  secret: string;
  /** 16 random bytes, hex. */
  salt: string;
  /** HMAC-SHA256(key = salt, message = secret), hex. */
  hash: string;
  /** e.g. `svc_live_…9fQa`. */
  redacted: string;
}

export interface ParsedApiKey {
  id: string;
  environment: KeyEnvironment;
}

const KEY_ID_LENGTH = 16;
const RANDOM_LENGTH = 32;
const SALT_BYTES = 16;
const RECORD_ID_PREFIX = 'key_';
const SECRET_PATTERN = /^svc_(live|test)_([0-9A-Za-z]{16})[0-9A-Za-z]{32}$/;
const PREFIX_PATTERN = /^svc_(?:live|test)_/;
/** Below this many characters after the prefix, no tail is shown at all. */
const MIN_BODY_FOR_TAIL = 16;

export function generateApiKey(environment: KeyEnvironment): GeneratedApiKey {
  const keyId = randomBase62(KEY_ID_LENGTH);
  const secret = `svc_${environment}_${keyId}${randomBase62(RANDOM_LENGTH)}`;
  const salt = randomBytes(SALT_BYTES).toString('hex');
  return {
    id: RECORD_ID_PREFIX + keyId,
    secret,
    salt,
    hash: hashSecret(secret, salt),
    redacted: redactKey(secret),
  };
}

/**
 * The record id and environment a presented secret names, or null when it is not
 * exactly a well-formed key (wrong prefix, length or alphabet; a `Bearer ` left on).
 */
export function parseApiKey(secret: string): ParsedApiKey | null {
  if (typeof secret !== 'string') return null;
  const match = SECRET_PATTERN.exec(secret);
  if (match === null) return null;
  const environment = match[1] === 'live' ? 'live' : 'test';
  return { id: RECORD_ID_PREFIX + (match[2] ?? ''), environment };
}

/** HMAC-SHA256 of the whole secret string, keyed by the salt, as lowercase hex. */
export function hashSecret(secret: string, salt: string): string {
  return createHmac('sha256', salt).update(secret, 'utf8').digest('hex');
}

/** Whether `secret` hashes to `expectedHash` under `salt`, compared in constant time. */
export function verifySecret(secret: string, salt: string, expectedHash: string): boolean {
  const actual = Buffer.from(hashSecret(secret, salt), 'utf8');
  const expected = Buffer.from(expectedHash, 'utf8');
  if (actual.length !== expected.length) return false;
  return timingSafeEqual(actual, expected);
}

/**
 * The prefix, `…`, and the last 4 characters: `svc_live_…9fQa`. A string that is not
 * long enough to spare 4 characters shows no tail, so redaction never reveals much.
 */
export function redactKey(secret: string): string {
  const prefix = PREFIX_PATTERN.exec(secret)?.[0] ?? '';
  const body = secret.slice(prefix.length);
  const tail = body.length >= MIN_BODY_FOR_TAIL ? body.slice(-4) : '';
  return `${prefix}…${tail}`;
}

/** Anything shaped like a gateway key, replaced, so that echoing caller input (in a message, a log line) never repeats a secret. */
export function scrubSecrets(text: string): string {
  return text.replace(/svc_(live|test)_[0-9A-Za-z]+/g, 'svc_$1_[redacted]');
}
