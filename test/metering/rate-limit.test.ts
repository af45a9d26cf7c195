import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitRequest } from '../../src/metering/rate-limit.js';

describe('admitRequest (GCRA)', () => {
  it('lets rpm requests through at once, refuses the next, and frees one slot per interval', () => {
    let tat = 0;
    const now = 1_000_000;
    for (let i = 0; i < 3; i++) {
      const d = admitRequest(3, tat, now);
      assert.ok(d.ok, `request ${i + 1}`);
      tat = d.tat;
    }
    const refused = admitRequest(3, tat, now);
    assert.deepEqual(refused, { ok: false, retryAfterSeconds: 20, message: 'This key allows 3 requests per minute.' });
    assert.equal(admitRequest(3, tat, now + 19_999).ok, false);
    assert.equal(admitRequest(3, tat, now + 20_000).ok, true);
  });

  it('is a token bucket: between any two admitted requests, at most rpm plus what the elapsed time refilled', () => {
    const rpm = 10;
    const interval = 60_000 / rpm;
    let tat = 0;
    const admitted: number[] = [];
    for (let t = 0; t < 10 * 60_000; t += 700) {
      const d = admitRequest(rpm, tat, t);
      if (d.ok) {
        tat = d.tat;
        admitted.push(t);
      }
    }
    admitted.forEach((first, i) => {
      for (let j = i; j < admitted.length; j++) {
        assert.ok(j - i + 1 <= rpm + (admitted[j]! - first) / interval, `from ${first} to ${admitted[j]}`);
      }
    });
    // Sustained demand above the limit gets exactly the limit over time.
    assert.ok(Math.abs(admitted.length - (rpm + 10 * rpm)) <= 1, String(admitted.length));
  });

  it('leaves a key without a limit alone', () => {
    assert.deepEqual(admitRequest(null, 42, 1), { ok: true, tat: 42 });
  });
});
