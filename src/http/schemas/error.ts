/** The one error body every failure leaves as (the contract's Errors section, OpenAI's shape). */
import { z } from 'zod';

export const errorBody = z.object({
  error: z.object({
    message: z.string().describe('In the gateway\'s own words; a 5xx message ends with the request id'),
    type: z.string().describe('authentication_error, invalid_request_error, permission_error, insufficient_credits, rate_limit_error, upstream_error, overloaded_error or server_error'),
    code: z.string().describe('invalid_api_key, api_key_revoked, invalid_json, invalid_value, model_not_found, context_length_exceeded, daily_credit_limit_exceeded, rate_limit_exceeded, permission_denied, idempotency_conflict, insufficient_credits, request_too_large, not_found, method_not_allowed, upstream_unavailable, upstream_timeout, overloaded, internal_error…'),
    param: z.string().nullable().describe('The field at fault (`messages[2].role`), or null'),
  }),
}).describe('An error: the status says the class, `code` says which');

export type ErrorBody = z.infer<typeof errorBody>;
