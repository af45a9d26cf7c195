import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `length` unbiased base62 characters from the system's CSPRNG. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      // 248 = 4 × 62: bytes above it would favour the first characters.
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix = 'acct' | 'grant' | 'res' | 'chatcmpl' | 'req';

/** Opaque prefixed ids: `acct_…`, `grant_…`; completions use OpenAI's `chatcmpl-…`. */
export function newId(prefix: IdPrefix): string {
  return prefix === 'chatcmpl' ? `chatcmpl-${randomBase62(24)}` : `${prefix}_${randomBase62(20)}`;
}
