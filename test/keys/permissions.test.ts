import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { managesAllKeys, mayCreate, mayRevoke, type KeyHolder } from '../../src/keys/permissions.js';

const owner: KeyHolder = { id: 'key_owner', environment: 'live', dailyCreditLimit: null };
const capped: KeyHolder = { id: 'key_capped', environment: 'live', dailyCreditLimit: 100 };
const testKey: KeyHolder = { id: 'key_test', environment: 'test', dailyCreditLimit: null };

function refusal(permission: ReturnType<typeof mayCreate>): { param: string | null; reason: string } {
  assert.equal(permission.allowed, false, 'expected a refusal');
  return permission.allowed ? assert.fail() : { param: permission.param, reason: permission.reason };
}

describe('key permissions', () => {
  it('lets only an uncapped live key manage every key', () => {
    assert.deepEqual([owner, capped, testKey, { ...testKey, dailyCreditLimit: 5 }].map(managesAllKeys), [true, false, false, false]);
  });

  it('lets an uncapped live key create anything', () => {
    for (const request of [{}, { environment: 'test' as const }, { daily_credit_limit: 10 ** 12 }, { daily_credit_limit: null }]) {
      assert.deepEqual(mayCreate(owner, request), { allowed: true });
    }
  });

  it('holds a capped key to its cap, an absent cap counting as none', () => {
    assert.deepEqual(mayCreate(capped, { daily_credit_limit: 100 }), { allowed: true });
    assert.deepEqual(mayCreate(capped, { daily_credit_limit: 0, environment: 'test' }), { allowed: true });
    assert.equal(refusal(mayCreate(capped, { daily_credit_limit: 101 })).param, 'daily_credit_limit');
    assert.match(refusal(mayCreate(capped, {})).reason, /no cap/);
    assert.match(refusal(mayCreate(capped, { daily_credit_limit: null })).reason, /at most 100/);
  });

  it('holds a test key to test keys, an absent environment counting as live', () => {
    assert.deepEqual(mayCreate(testKey, { environment: 'test' }), { allowed: true });
    assert.equal(refusal(mayCreate(testKey, { environment: 'live' })).param, 'environment');
    assert.match(refusal(mayCreate(testKey, {})).reason, /Pass "environment": "test"/);
  });

  it('lets any key revoke itself, and only an uncapped live key revoke others', () => {
    for (const holder of [owner, capped, testKey]) assert.deepEqual(mayRevoke(holder, holder.id), { allowed: true });
    assert.deepEqual(mayRevoke(owner, 'key_other'), { allowed: true });
    assert.match(refusal(mayRevoke(capped, 'key_owner')).reason, /daily cap/);
    assert.match(refusal(mayRevoke(testKey, 'key_owner')).reason, /test key/);
    assert.equal(refusal(mayRevoke(testKey, 'key_owner')).param, 'id');
  });
});
