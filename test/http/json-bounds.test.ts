/**
 * The depth and size bounds on caller JSON: the text scan before parsing and the
 * walk over parsed values, both iterative, both exact at their limits.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { exceededBound, findDeepNesting } from '../../src/http/json-bounds.js';

const arrays = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;

/** `depth` objects nested in one another, built without recursion. */
function nestedValue(depth: number): object {
  let value: object = {};
  for (let level = 1; level < depth; level += 1) value = { a: value };
  return value;
}

describe('findDeepNesting', () => {
  it('accepts text nested exactly to the bound and refuses one level more, naming the top-level key', () => {
    assert.equal(findDeepNesting(`{"a":${arrays(3)}}`, 4), null);
    assert.deepEqual(findDeepNesting(`{"a":${arrays(4)}}`, 4), { key: 'a' });
  });

  it('names the key the nesting is under, not an earlier key, a value or a nested key', () => {
    assert.deepEqual(findDeepNesting(`{"a":"x","b":[1,2],"c":{"inner":${arrays(10)}}}`, 5), { key: 'c' });
    assert.deepEqual(findDeepNesting(`{"b\\u0061\\"":${arrays(10)}}`, 5), { key: 'ba"' });
  });

  it('ignores brackets, braces, commas and escaped quotes inside strings', () => {
    assert.equal(findDeepNesting(`{"a":"${'[{'.repeat(100)}","b":"\\"[[[[[[,{{{{"}`, 2), null);
    assert.equal(findDeepNesting(`{"${'['.repeat(50)}":1}`, 2), null);
  });

  it('gives no key for a document that is not an object, or an object too deep before its first key', () => {
    assert.deepEqual(findDeepNesting(arrays(4_000_000), 128), { key: null });
    assert.deepEqual(findDeepNesting(`{${arrays(10)}}`, 5), { key: null });
  });
});

describe('exceededBound', () => {
  const bounds = { maxDepth: 32, maxValues: 10_000 };

  it('accepts scalars and values within both bounds', () => {
    for (const value of [null, 1, 'text', true, [], {}, { type: 'object', properties: { city: { type: 'string' } } }]) {
      assert.equal(exceededBound(value, bounds), null);
    }
  });

  it('refuses one level past the depth bound, objects and arrays alike, without recursing', () => {
    assert.equal(exceededBound(nestedValue(32), bounds), null);
    assert.equal(exceededBound(nestedValue(33), bounds), 'depth');
    assert.equal(exceededBound(nestedValue(1_000_000), bounds), 'depth');
    assert.equal(exceededBound(JSON.parse(arrays(33)), bounds), 'depth');
    assert.equal(exceededBound({ wide: Array.from({ length: 50 }, () => ({})), deep: nestedValue(32) }, bounds), 'depth');
  });

  it('counts every value, containers and scalars, against the size bound', () => {
    assert.equal(exceededBound(Array.from({ length: 9_999 }, () => 0), bounds), null, 'the array and its 9,999 items');
    assert.equal(exceededBound(Array.from({ length: 10_000 }, () => 0), bounds), 'values');
    const wide = Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`k${i}`, 0]));
    assert.equal(exceededBound({ type: 'object', properties: wide }, bounds), 'values');
    const spread = Array.from({ length: 100 }, () => Array.from({ length: 100 }, () => 0));
    assert.equal(exceededBound(spread, bounds), 'values', '1 + 100 + 100 × 100 values');
  });
});
