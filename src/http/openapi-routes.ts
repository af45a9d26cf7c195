/**
 * The route table of the API document (GET /openapi.json): every endpoint the
 * server registers, with the zod schemas that validate its input and describe
 * its answers. src/http/openapi.ts turns it into OpenAPI 3.1.
 *
 * To add a route (e.g. `GET /admin/v1/accounts`, `/dashboard`):
 *  1. give its request body, query and answer a zod schema in src/http/schemas/
 *     and validate / type the route with it (parseBody, parseQuery, z.infer);
 *  2. name each new schema in REQUEST_SCHEMAS or RESPONSE_SCHEMAS below (the
 *     name is its key under components.schemas);
 *  3. add one entry to API_ROUTES: method, path as Fastify has it (`:id`),
 *     auth, schemas, the success statuses and the error statuses it answers
 *     with (each gets the contract's error body).
 * test/http/openapi.test.ts fails while a route Fastify registers is missing here.
 */
import type { z } from 'zod';
import { apiKeyCreated, apiKeyDeleted, apiKeyList, creditsObject, modelList, modelObject, usageObject, usageQuery } from './schemas/account.js';
import { accountList, accountObject, accountWithCredits, createAccountBody, creditGrantObject, grantBody, listAccountsQuery, trafficObject, upstreamList } from './schemas/admin.js';
import { createApiKeyBody } from './schemas/api-key.js';
import { chatCompletionBody } from './schemas/chat-completion.js';
import { chatCompletionChunk, chatCompletionObject, streamErrorChunk } from './schemas/chat-completion-response.js';
import { errorBody } from './schemas/error.js';
import { healthObject, readinessObject } from './schemas/health.js';

/** Request schemas, documented as the server reads them (zod's input side: unknown fields allowed, then dropped). */
export const REQUEST_SCHEMAS: Record<string, z.ZodType> = {
  ChatCompletionRequest: chatCompletionBody,
  CreateApiKeyRequest: createApiKeyBody,
  CreateAccountRequest: createAccountBody,
  CreditGrantRequest: grantBody,
};

/** Answer schemas, documented as the server writes them. */
export const RESPONSE_SCHEMAS: Record<string, z.ZodType> = {
  Error: errorBody,
  ChatCompletion: chatCompletionObject,
  ChatCompletionChunk: chatCompletionChunk,
  StreamErrorChunk: streamErrorChunk,
  Model: modelObject,
  ModelList: modelList,
  Credits: creditsObject,
  ApiKeyList: apiKeyList,
  ApiKeyCreated: apiKeyCreated,
  ApiKeyDeleted: apiKeyDeleted,
  Usage: usageObject,
  Account: accountObject,
  AccountWithCredits: accountWithCredits,
  CreditGrant: creditGrantObject,
  UpstreamList: upstreamList,
  AccountList: accountList,
  Traffic: trafficObject,
  Health: healthObject,
  Readiness: readinessObject,
};

export type Auth = 'api_key' | 'admin_token' | 'none';

export interface ApiAnswer {
  description: string;
  /** A JSON body; its schema must be named in RESPONSE_SCHEMAS. */
  json?: z.ZodType;
  /** A non-JSON body of this media type (a string: Prometheus text, HTML, the document itself). */
  media?: string;
  /** The answer may be this SSE stream instead (`stream: true`): each `data:` line one of these chunks. */
  stream?: z.ZodType[];
}

export interface ApiRoute {
  method: 'get' | 'post' | 'delete';
  /** As registered in Fastify, path parameters as `:name`. */
  path: string;
  summary: string;
  tag: 'Chat' | 'Account' | 'Admin' | 'Operations';
  auth: Auth;
  body?: z.ZodType;
  query?: z.ZodObject;
  /** Request headers the route reads besides Authorization. */
  headers?: Array<{ name: string; description: string }>;
  answers: Record<number, ApiAnswer>;
  /** Statuses answered with the error body, as the contract lists them. */
  errors: number[];
}

const V1_ERRORS = [401, 500];
const ADMIN_ERRORS = [401, 500];

export const API_ROUTES: ApiRoute[] = [
  {
    method: 'post', path: '/v1/chat/completions', tag: 'Chat', auth: 'api_key',
    summary: 'Create a chat completion (JSON, or an SSE stream with `stream: true`); credits are reserved, then settled',
    body: chatCompletionBody,
    headers: [{ name: 'Idempotency-Key', description: 'Same key and body within 24 h: the first response again, charged once (1-255 characters)' }],
    answers: { 200: { description: 'The completion', json: chatCompletionObject, stream: [chatCompletionChunk, streamErrorChunk] } },
    errors: [400, 401, 402, 404, 409, 413, 429, 500, 502, 503, 504],
  },
  {
    method: 'get', path: '/v1/models', tag: 'Account', auth: 'api_key', summary: 'The catalog\'s model aliases',
    answers: { 200: { description: 'Every alias', json: modelList } }, errors: V1_ERRORS,
  },
  {
    method: 'get', path: '/v1/models/:id', tag: 'Account', auth: 'api_key', summary: 'One model alias',
    answers: { 200: { description: 'The alias', json: modelObject } }, errors: [...V1_ERRORS, 404],
  },
  {
    method: 'get', path: '/v1/credits', tag: 'Account', auth: 'api_key', summary: 'The account\'s balances',
    answers: { 200: { description: 'Balances', json: creditsObject } }, errors: V1_ERRORS,
  },
  {
    method: 'get', path: '/v1/usage', tag: 'Account', auth: 'api_key', summary: 'Settled usage by UTC day and alias',
    query: usageQuery,
    answers: { 200: { description: 'The rollup', json: usageObject } }, errors: [400, ...V1_ERRORS],
  },
  {
    method: 'get', path: '/v1/api-keys', tag: 'Account', auth: 'api_key', summary: 'The account\'s API keys (never their secrets)',
    answers: { 200: { description: 'The keys', json: apiKeyList } }, errors: V1_ERRORS,
  },
  {
    method: 'post', path: '/v1/api-keys', tag: 'Account', auth: 'api_key', summary: 'Create an API key; its secret is shown once',
    body: createApiKeyBody,
    answers: { 201: { description: 'The new key with its secret', json: apiKeyCreated } }, errors: [400, ...V1_ERRORS, 403, 413],
  },
  {
    method: 'delete', path: '/v1/api-keys/:id', tag: 'Account', auth: 'api_key', summary: 'Revoke an API key',
    answers: { 200: { description: 'Revoked', json: apiKeyDeleted } }, errors: [...V1_ERRORS, 403, 404],
  },
  {
    method: 'get', path: '/admin/v1/accounts', tag: 'Admin', auth: 'admin_token', summary: 'A page of accounts in id order, with their balances',
    query: listAccountsQuery,
    answers: { 200: { description: 'The page', json: accountList } }, errors: [400, ...ADMIN_ERRORS],
  },
  {
    method: 'post', path: '/admin/v1/accounts', tag: 'Admin', auth: 'admin_token', summary: 'Create an account',
    body: createAccountBody,
    answers: { 201: { description: 'The account', json: accountObject } }, errors: [400, ...ADMIN_ERRORS, 413],
  },
  {
    method: 'get', path: '/admin/v1/accounts/:id', tag: 'Admin', auth: 'admin_token', summary: 'An account with its balances',
    answers: { 200: { description: 'The account', json: accountWithCredits } }, errors: [...ADMIN_ERRORS, 404],
  },
  {
    method: 'post', path: '/admin/v1/accounts/:id/grants', tag: 'Admin', auth: 'admin_token', summary: 'Grant earned or purchased credits',
    body: grantBody,
    answers: { 201: { description: 'The grant', json: creditGrantObject } }, errors: [400, ...ADMIN_ERRORS, 404, 413],
  },
  {
    method: 'post', path: '/admin/v1/accounts/:id/api-keys', tag: 'Admin', auth: 'admin_token', summary: 'Create an API key for an account',
    body: createApiKeyBody,
    answers: { 201: { description: 'The new key with its secret', json: apiKeyCreated } }, errors: [400, ...ADMIN_ERRORS, 404, 413],
  },
  {
    method: 'get', path: '/admin/v1/upstreams', tag: 'Admin', auth: 'admin_token', summary: 'Each upstream\'s health as this instance\'s router sees it',
    answers: { 200: { description: 'The upstreams', json: upstreamList } }, errors: ADMIN_ERRORS,
  },
  {
    method: 'get', path: '/admin/v1/traffic', tag: 'Admin', auth: 'admin_token', summary: 'Requests per minute by alias over the last hour (this instance)',
    answers: { 200: { description: 'The series', json: trafficObject } }, errors: ADMIN_ERRORS,
  },
  {
    method: 'get', path: '/dashboard', tag: 'Operations', auth: 'none', summary: 'The dashboard page (signs in with an API key or the admin token, kept in memory)',
    answers: { 200: { description: 'HTML', media: 'text/html; charset=utf-8' } }, errors: [],
  },
  {
    method: 'get', path: '/dashboard/', tag: 'Operations', auth: 'none', summary: 'Redirects to /dashboard',
    answers: { 308: { description: 'To /dashboard' } }, errors: [],
  },
  {
    method: 'get', path: '/dashboard/:file', tag: 'Operations', auth: 'none', summary: 'A dashboard asset (script, style sheet), served by the gateway itself',
    answers: { 200: { description: 'The file', media: 'application/octet-stream' } }, errors: [404],
  },
  {
    method: 'get', path: '/healthz', tag: 'Operations', auth: 'none', summary: 'Alive',
    answers: { 200: { description: 'Alive', json: healthObject } }, errors: [],
  },
  {
    method: 'get', path: '/readyz', tag: 'Operations', auth: 'none', summary: 'Ready: the database answers',
    answers: { 200: { description: 'Ready', json: readinessObject }, 503: { description: 'The database does not answer', json: readinessObject } },
    errors: [],
  },
  {
    method: 'get', path: '/metrics', tag: 'Operations', auth: 'none', summary: 'Prometheus metrics (text exposition format)',
    answers: { 200: { description: 'The metrics', media: 'text/plain; version=0.0.4; charset=utf-8' } }, errors: [],
  },
  {
    method: 'get', path: '/openapi.json', tag: 'Operations', auth: 'none', summary: 'This document',
    answers: { 200: { description: 'OpenAPI 3.1', media: 'application/json' } }, errors: [],
  },
];
