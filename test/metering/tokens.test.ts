import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encode } from 'gpt-tokenizer';
import { countPromptTokens, countTextTokens } from '../../src/metering/tokens.js';

const prose = 'The gateway reserves credits before it calls an upstream, and settles them after. ';

describe('token counting', () => {
  it('counts ordinary text exactly as the tokenizer does, also across its internal pieces', () => {
    for (const text of ['hello', prose, prose.repeat(1000), `${prose.repeat(300)}\n\n${'def f(x):\n    return x * 2\n'.repeat(200)}`]) {
      assert.equal(countTextTokens(text), encode(text).length);
    }
    assert.equal(countTextTokens(''), 0);
    assert.equal(countTextTokens('<|endoftext|>'), encode('<|endoftext|>', { disallowedSpecial: new Set() }).length);
  });

  it('counts a long run without spaces in linear work, within a token per slice of the exact count', () => {
    const run = 'a'.repeat(4096);
    const exact = encode(run).length;
    const counted = countTextTokens(run);
    assert.ok(counted >= exact && counted <= exact + 4096 / 256, `${counted} vs ${exact}`);
    // A 1 MiB run (quadratic in the tokenizer alone) comes back with a plausible count.
    const huge = countTextTokens('x'.repeat(1 << 20));
    assert.ok(huge > (1 << 20) / 256 && huge <= 1 << 20, String(huge));
  });

  it('counts a long run of whitespace in linear work too', () => {
    const text = `start${'\n'.repeat(300_000)}end`;
    const counted = countTextTokens(text);
    assert.ok(counted >= 2 && counted <= 300_000, String(counted));
    // Runs up to the slice length are counted exactly.
    assert.equal(countTextTokens(`a${' '.repeat(200)}b`), encode(`a${' '.repeat(200)}b`).length);
  });

  it('cuts runs exactly where a regex split into \\S+ and \\s+ runs would, Unicode spaces included', () => {
    // The slicing this replaced, kept here as the reference: runs found by a regex, long ones cut every 256.
    const reference = (text: string): number => {
      let total = 0;
      let last = 0;
      for (const run of text.matchAll(/\S+|\s+/g)) {
        if (run[0].length <= 256) continue;
        total += encode(text.slice(last, run.index)).length;
        for (let i = 0; i < run[0].length; i += 256) total += encode(run[0].slice(i, i + 256)).length;
        last = run.index + run[0].length;
      }
      return total + encode(text.slice(last)).length;
    };
    const spaces = [' ', '\t', '\n', '\u00a0', '\u2003', '\u3000', '\ufeff', '\u2028'];
    let seed = 7;
    const next = () => (seed = (seed * 48271) % 2147483647);
    for (let round = 0; round < 40; round++) {
      let text = '';
      while (text.length < 3000) {
        const long = next() % 5 === 0;
        const length = long ? 200 + (next() % 400) : 1 + (next() % 12);
        text += next() % 2 === 0 ? spaces[next() % spaces.length]!.repeat(length) : 'ab1é中'.charAt(next() % 5).repeat(length);
      }
      assert.equal(countTextTokens(text), reference(text), `round ${round}`);
    }
  });

  it('stops counting past a limit', () => {
    const big = prose.repeat(100_000);
    const limited = countTextTokens(big, 1000);
    assert.ok(limited > 1000 && limited < 10_000, String(limited));
    const messages = [{ role: 'user' as const, content: big }, { role: 'user' as const, content: 'more' }];
    assert.ok(countPromptTokens(messages, 64_000) > 64_000);
    assert.equal(countPromptTokens([{ role: 'user', content: 'hello' }], 64_000), countPromptTokens([{ role: 'user', content: 'hello' }]));
  });
});
