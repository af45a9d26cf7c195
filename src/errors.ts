/**
 * The one family of failures that reach a caller. Each carries the OpenAI error
 * fields and its HTTP status; `src/http/errors.ts` is the only place that turns
 * one into a response. The public `message` is what the caller reads; `cause`
 * keeps the internal detail for logs only.
 */
import { scrubSecrets } from './keys/secret.js';
import type { ErrorBody } from './http/schemas/error.js';

export type ErrorType =
  | 'authentication_error'
  | 'invalid_request_error'
  | 'rate_limit_error'
  | 'permission_error'
  | 'insufficient_credits'
  | 'upstream_error'
  | 'overloaded_error'
  | 'server_error';

export interface GatewayErrorInit {
  status: number;
  type: ErrorType;
  code: string;
  message: string;
  param?: string | null;
  headers?: Record<string, string>;
  retryable?: boolean;
  cause?: unknown;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  readonly retryable: boolean;

  constructor(init: GatewayErrorInit) {
    super(init.message, { cause: init.cause });
    this.name = 'GatewayError';
    this.status = init.status;
    this.type = init.type;
    this.code = init.code;
    this.param = init.param ?? null;
    this.headers = init.headers ?? {};
    this.retryable = init.retryable ?? false;
  }

  /**
   * The OpenAI error body. A failure of the gateway's own (5xx) names the
   * request id, which finds its details in the log.
   */
  toBody(requestId?: string): ErrorBody {
    const message = requestId !== undefined && this.status >= 500 ? `${this.message} (request id: ${requestId})` : this.message;
    return { error: { message, type: this.type, code: this.code, param: this.param } };
  }
}

const noRetry = { 'x-should-retry': 'false' };

export const errors = {
  invalidApiKey: (message = 'Invalid API key. Send "Authorization: Bearer svc_live_…" with a key of this gateway.') =>
    new GatewayError({ status: 401, type: 'authentication_error', code: 'invalid_api_key', message }),
  apiKeyRevoked: () =>
    new GatewayError({ status: 401, type: 'authentication_error', code: 'api_key_revoked', message: 'This API key has been revoked.' }),
  invalidJson: (message = 'The request body must be a JSON object.') =>
    new GatewayError({ status: 400, type: 'invalid_request_error', code: 'invalid_json', message }),
  invalidValue: (param: string | null, message: string) =>
    new GatewayError({ status: 400, type: 'invalid_request_error', code: 'invalid_value', message, param }),
  modelNotFound: (model: string) =>
    new GatewayError({
      status: 404, type: 'invalid_request_error', code: 'model_not_found', param: 'model',
      message: `The model '${scrubSecrets(model)}' does not exist. GET /v1/models lists the available models.`,
    }),
  contextLengthExceeded: (message: string) =>
    new GatewayError({ status: 400, type: 'invalid_request_error', code: 'context_length_exceeded', param: 'messages', message }),
  dailyCapReached: (message: string, retryAfterSeconds: number) =>
    new GatewayError({
      status: 429, type: 'rate_limit_error', code: 'daily_credit_limit_exceeded', message,
      headers: { ...noRetry, 'retry-after': String(retryAfterSeconds) },
    }),
  rateLimited: (message: string, retryAfterSeconds: number) =>
    new GatewayError({
      status: 429, type: 'rate_limit_error', code: 'rate_limit_exceeded', message, retryable: true,
      headers: { 'x-should-retry': 'true', 'retry-after': String(retryAfterSeconds) },
    }),
  permissionDenied: (message: string, param: string | null = null) =>
    new GatewayError({ status: 403, type: 'permission_error', code: 'permission_denied', message, param }),
  idempotencyConflict: (message: string) =>
    new GatewayError({ status: 409, type: 'invalid_request_error', code: 'idempotency_conflict', message }),
  insufficientCredits: (message: string) =>
    new GatewayError({ status: 402, type: 'insufficient_credits', code: 'insufficient_credits', message, headers: noRetry }),
  requestTooLarge: () =>
    new GatewayError({ status: 413, type: 'invalid_request_error', code: 'request_too_large', message: 'The request body is larger than 8 MiB.' }),
  notFound: (message = 'Unknown path.') =>
    new GatewayError({ status: 404, type: 'invalid_request_error', code: 'not_found', message }),
  apiKeyNotFound: (id: string) =>
    new GatewayError({ status: 404, type: 'invalid_request_error', code: 'api_key_not_found', param: 'id', message: `No active API key '${scrubSecrets(id)}' on this account.` }),
  accountNotFound: (id: string) =>
    new GatewayError({ status: 404, type: 'invalid_request_error', code: 'account_not_found', param: 'id', message: `No account '${scrubSecrets(id)}'.` }),
  methodNotAllowed: (method: string, path: string) =>
    new GatewayError({ status: 405, type: 'invalid_request_error', code: 'method_not_allowed', message: `${method} is not allowed on ${scrubSecrets(path)}.` }),
  upstreamUnavailable: (message: string, cause?: unknown) =>
    new GatewayError({ status: 502, type: 'upstream_error', code: 'upstream_unavailable', message, retryable: true, cause }),
  upstreamTimeout: (message: string, cause?: unknown) =>
    new GatewayError({ status: 504, type: 'upstream_error', code: 'upstream_timeout', message, retryable: true, cause }),
  overloaded: (retryAfterSeconds: number) =>
    new GatewayError({
      status: 503, type: 'overloaded_error', code: 'overloaded', retryable: true,
      message: 'The gateway has too much work queued; retry shortly.', headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  internal: (cause?: unknown) =>
    new GatewayError({ status: 500, type: 'server_error', code: 'internal_error', message: 'The gateway hit an internal error.', retryable: true, cause }),
};
