import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LeadingWhitespace } from '../../../src/providers/anthropic/continuation.js';

describe('continuation whitespace', () => {
  it('drops as many leading whitespace characters as were cut, across pieces', () => {
    const leading = new LeadingWhitespace(3);
    assert.equal(leading.take(' '), '');
    assert.equal(leading.take('\n'), '');
    assert.equal(leading.take('  next'), ' next');
    assert.equal(leading.take(' again'), ' again');
  });

  it('stops dropping at the first character that is not whitespace', () => {
    const leading = new LeadingWhitespace(4);
    assert.equal(leading.take('word'), 'word');
    assert.equal(leading.take(' more'), ' more');
  });

  it('drops nothing when nothing was cut', () => {
    assert.equal(new LeadingWhitespace(0).take('  kept'), '  kept');
  });
});
