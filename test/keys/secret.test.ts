import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  generateApiKey,
  hashSecret,
  parseApiKey,
  redactKey,
  verifySecret,
} from '../../src/keys/secret.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const VALID_LIVE = 'svc_live_' + 'A'.repeat(16) + 'b'.repeat(32);

/** Replaces the character at `index` with a different base62 character. */
function flipCharAt(text: string, index: number): string {
  const current = text[index];
  const replacement = current === 'x' ? 'y' : 'x';
  return text.slice(0, index) + replacement + text.slice(index + 1);
}

describe('generateApiKey', () => {
  it('has the svc_<env>_<keyid><secret> format and lengths', () => {
    for (const environment of ['live', 'test'] as const) {
      const key = generateApiKey(environment);
      const prefix = `svc_${environment}_`;
      assert.ok(key.secret.startsWith(prefix));
      assert.equal(key.secret.length, prefix.length + 16 + 32);
      assert.match(key.secret.slice(prefix.length), /^[0-9A-Za-z]{48}$/);
      assert.equal(key.id, 'key_' + key.secret.slice(prefix.length, prefix.length + 16));
      assert.match(key.salt, /^[0-9a-f]{32}$/);
      assert.match(key.hash, /^[0-9a-f]{64}$/);
      assert.equal(key.hash, hashSecret(key.secret, key.salt));
    }
  });

  it('gives a different key, id and salt every time', () => {
    const a = generateApiKey('live');
    const b = generateApiKey('live');
    assert.notEqual(a.secret, b.secret);
    assert.notEqual(a.id, b.id);
    assert.notEqual(a.salt, b.salt);
    assert.notEqual(a.hash, b.hash);
  });

  it('stores a hash that does not contain the secret or its random part', () => {
    const key = generateApiKey('live');
    const randomPart = key.secret.slice(-32);
    assert.ok(!key.hash.includes(key.secret));
    assert.ok(!key.hash.includes(randomPart));
    assert.ok(!key.hash.includes(randomPart.slice(0, 8)));
    assert.ok(!key.redacted.includes(randomPart.slice(0, 8)));
  });
});

describe('parseApiKey', () => {
  it('round-trips a generated key', () => {
    for (const environment of ['live', 'test'] as const) {
      const key = generateApiKey(environment);
      assert.deepEqual(parseApiKey(key.secret), { id: key.id, environment });
    }
  });

  it('accepts a hand-made well-formed key', () => {
    assert.deepEqual(parseApiKey(VALID_LIVE), { id: 'key_' + 'A'.repeat(16), environment: 'live' });
  });

  it('rejects a wrong prefix', () => {
    const body = VALID_LIVE.slice('svc_live_'.length);
    for (const prefix of ['svc_prod_', 'SVC_live_', 'svc-live-', 'sk_live_', 'svc_live', 'svc__', '']) {
      assert.equal(parseApiKey(prefix + body), null, prefix);
    }
  });

  it('rejects a wrong length', () => {
    assert.equal(parseApiKey(VALID_LIVE.slice(0, -1)), null);
    assert.equal(parseApiKey(VALID_LIVE + 'c'), null);
    assert.equal(parseApiKey('svc_live_' + 'A'.repeat(16)), null);
  });

  it('rejects characters outside base62 and surrounding whitespace', () => {
    for (const bad of ['-', '_', '+', '/', '=', ' ', 'é', '\n']) {
      assert.equal(parseApiKey(VALID_LIVE.slice(0, 30) + bad + VALID_LIVE.slice(31)), null, bad);
    }
    assert.equal(parseApiKey(` ${VALID_LIVE}`), null);
    assert.equal(parseApiKey(`${VALID_LIVE}\n`), null);
  });

  it('rejects empty input and a whole Authorization header', () => {
    assert.equal(parseApiKey(''), null);
    assert.equal(parseApiKey('Bearer ' + VALID_LIVE), null);
    assert.equal(parseApiKey('Bearer'), null);
  });

  it('never throws, whatever it is given', () => {
    const odd: unknown[] = [undefined, null, 42, {}, 'svc_live_', '\u0000'.repeat(57)];
    for (const value of odd) {
      assert.equal(parseApiKey(value as string), null);
    }
  });
});

describe('verifySecret', () => {
  it('accepts the right secret', () => {
    const key = generateApiKey('live');
    assert.equal(verifySecret(key.secret, key.salt, key.hash), true);
  });

  it('rejects a one-character change anywhere in the secret', () => {
    const key = generateApiKey('test');
    for (const index of [0, 9, 20, key.secret.length - 1]) {
      assert.equal(verifySecret(flipCharAt(key.secret, index), key.salt, key.hash), false);
    }
  });

  it('rejects a wrong salt', () => {
    const key = generateApiKey('live');
    const other = generateApiKey('live');
    assert.equal(verifySecret(key.secret, other.salt, key.hash), false);
    assert.equal(verifySecret(key.secret, flipCharAt(key.salt, 0), key.hash), false);
  });

  it('returns false without throwing for a malformed expected hash', () => {
    const key = generateApiKey('live');
    assert.equal(verifySecret(key.secret, key.salt, ''), false);
    assert.equal(verifySecret(key.secret, key.salt, key.hash.slice(1)), false);
    assert.equal(verifySecret(key.secret, key.salt, key.hash + '0'), false);
    assert.equal(verifySecret(key.secret, key.salt, 'not hex at all'), false);
  });
});

describe('redactKey', () => {
  it('shows the prefix, an ellipsis and the last 4 characters', () => {
    const key = generateApiKey('live');
    assert.equal(key.redacted, `svc_live_…${key.secret.slice(-4)}`);
    assert.equal(redactKey(VALID_LIVE), 'svc_live_…bbbb');
    assert.match(redactKey(generateApiKey('test').secret), /^svc_test_…[0-9A-Za-z]{4}$/);
  });

  it('shows no tail for something too short to spare it', () => {
    assert.equal(redactKey('svc_live_abc'), 'svc_live_…');
    assert.equal(redactKey(''), '…');
  });
});

describe('randomness', () => {
  const SAMPLE = 1_000;
  const secrets = Array.from({ length: SAMPLE }, () => generateApiKey('live').secret);

  it('gives 1,000 distinct keys and ids', () => {
    assert.equal(new Set(secrets).size, SAMPLE);
    assert.equal(new Set(secrets.map((secret) => parseApiKey(secret)?.id)).size, SAMPLE);
  });

  it('draws the random part uniformly over base62 (chi-square, loose bound)', () => {
    const counts = new Map<string, number>();
    for (const secret of secrets) {
      for (const char of secret.slice(-32)) counts.set(char, (counts.get(char) ?? 0) + 1);
    }
    const total = SAMPLE * 32;
    const expected = total / 62;
    let chiSquare = 0;
    for (const char of BASE62) {
      const observed = counts.get(char) ?? 0;
      assert.ok(observed > expected * 0.6 && observed < expected * 1.4, `${char}: ${observed}`);
      chiSquare += (observed - expected) ** 2 / expected;
    }
    assert.equal(counts.size, 62);
    // 61 degrees of freedom: mean 61, sd ≈ 11. Uniform output exceeds 150 with
    // probability well under one in a million; a `byte % 62` generator lands near 270.
    assert.ok(chiSquare < 150, `chi-square ${chiSquare.toFixed(1)}`);
  });
});
