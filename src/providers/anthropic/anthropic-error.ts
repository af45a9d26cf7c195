/**
 * Anthropic's error body (`{"type": "error", "error": {"type", "message"}}`),
 * sent as an `error` event in a stream, as the one typed failure. Each error
 * type fails as the HTTP status Anthropic documents for it, so that an
 * `overloaded_error` mid-stream counts against the route exactly as a 529
 * answer does. An error of a type not known here, or one that cannot be read,
 * is malformed.
 */
import { isRecord, parseJson, snippetOf } from '../http.js';
import { UpstreamError } from '../types.js';

const STATUS_OF_ERROR: ReadonlyMap<string, number> = new Map([
  ['invalid_request_error', 400],
  ['authentication_error', 401],
  ['billing_error', 402],
  ['permission_error', 403],
  ['not_found_error', 404],
  ['request_too_large', 413],
  ['rate_limit_error', 429],
  ['api_error', 500],
  ['timeout_error', 504],
  ['overloaded_error', 529],
]);

export function anthropicFailure(id: string, text: string): UpstreamError {
  const body = parseJson(text);
  const type = isRecord(body) && isRecord(body.error) ? body.error.type : undefined;
  const status = typeof type === 'string' ? STATUS_OF_ERROR.get(type) : undefined;
  if (status === undefined) return new UpstreamError('malformed', `${id} sent an error event: ${snippetOf(text)}`);
  return new UpstreamError('status', `${id} sent ${type} (as ${status}): ${snippetOf(text)}`, { status });
}
