import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicFailure } from '../../../src/providers/anthropic/anthropic-error.js';

const body = (type: string) => JSON.stringify({ type: 'error', error: { type, message: 'detail' } });

describe('anthropic errors', () => {
  const statuses = [
    ['invalid_request_error', 400], ['authentication_error', 401], ['billing_error', 402], ['permission_error', 403],
    ['not_found_error', 404], ['request_too_large', 413], ['rate_limit_error', 429], ['api_error', 500],
    ['timeout_error', 504], ['overloaded_error', 529],
  ] as const;
  for (const [type, status] of statuses) {
    it(`fails ${type} as status ${status}`, () => {
      const error = anthropicFailure('anthropic', body(type));
      assert.equal(error.failure, 'status');
      assert.equal(error.status, status);
      assert.equal(error.retryable, true);
    });
  }

  it('fails an unknown type (even one named like an object property) or an unreadable body as malformed', () => {
    for (const text of [body('toString'), body('__proto__'), '{"type": "error"}', 'not json']) {
      const error = anthropicFailure('anthropic', text);
      assert.equal(error.failure, 'malformed');
      assert.equal(error.status, null);
    }
  });
});
