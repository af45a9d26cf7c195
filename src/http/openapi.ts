/**
 * GET /openapi.json: the OpenAPI 3.1 document of every endpoint, generated from
 * the route table (./openapi-routes.ts, which says how to add a route) and the
 * zod schemas that validate requests and type the answers, by zod's own
 * `z.toJSONSchema`. Nothing of a shape is written here a second time.
 */
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { API_ROUTES, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, type ApiAnswer, type ApiRoute, type Auth } from './openapi-routes.js';

type Json = Record<string, unknown>;

/** What each error status means, by the contract's Errors table. */
const ERROR_STATUSES: Record<number, { description: string; retryAfter?: boolean }> = {
  400: { description: 'invalid_json (not JSON, or not an object), invalid_value (`param` names the field), context_length_exceeded' },
  401: { description: 'invalid_api_key (no, malformed or unknown key; a wrong admin token), api_key_revoked' },
  402: { description: 'insufficient_credits: the balance cannot cover the reservation (`x-should-retry: false`)' },
  403: { description: 'permission_denied: the key asks for more than it holds' },
  404: { description: 'model_not_found, api_key_not_found, account_not_found, or not_found (unknown path)' },
  409: { description: 'idempotency_conflict: the Idempotency-Key was used with another body, or its first request still runs' },
  413: { description: 'request_too_large: the body is over 8 MiB' },
  429: { description: 'daily_credit_limit_exceeded (the key\'s daily cap; `x-should-retry: false`) or rate_limit_exceeded (`rate_limit_rpm`)', retryAfter: true },
  500: { description: 'internal_error' },
  502: { description: 'upstream_unavailable: every upstream failed' },
  503: { description: 'overloaded: too much work in flight', retryAfter: true },
  504: { description: 'upstream_timeout: every upstream timed out' },
};

const SECURITY: Record<Exclude<Auth, 'none'>, Json> = {
  api_key: { type: 'http', scheme: 'bearer', bearerFormat: 'sk-svc-…', description: 'An API key: `Authorization: Bearer sk-svc-live-…`' },
  admin_token: { type: 'http', scheme: 'bearer', description: 'The operator\'s token (SVC_ADMIN_TOKEN); /admin/v1 exists only when it is set' },
};

export function buildOpenApiDocument(routes: readonly ApiRoute[] = API_ROUTES): Json {
  const names = new Map<z.ZodType, string>();
  for (const [name, schema] of [...Object.entries(REQUEST_SCHEMAS), ...Object.entries(RESPONSE_SCHEMAS)]) names.set(schema, name);
  const paths: Record<string, Json> = {};
  for (const route of routes) {
    const path = route.path.replace(/:(\w+)/g, '{$1}');
    (paths[path] ??= {})[route.method] = operation(route, (schema) => ref(names, schema));
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc-gateway',
      version: packageVersion(),
      description: 'A credit-metered LLM API gateway speaking the OpenAI chat-completions convention. '
        + 'Every error is `{"error": {"message", "type", "code", "param"}}`; every answer carries `x-request-id`. '
        + 'A path answers 405 method_not_allowed to the methods it does not take.',
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    tags: [
      { name: 'Chat', description: 'Completions, metered in credits' },
      { name: 'Account', description: 'The caller\'s own account, by its API key' },
      { name: 'Admin', description: 'The operator\'s API, by the admin token' },
      { name: 'Operations', description: 'Probes, metrics and this document: no authentication' },
    ],
    paths,
    components: {
      schemas: { ...componentSchemas(REQUEST_SCHEMAS, 'input'), ...componentSchemas(RESPONSE_SCHEMAS, 'output') },
      securitySchemes: SECURITY,
    },
  };
}

/** Serves the document, built once. */
export function openApiRoutes(app: FastifyInstance): void {
  let document: Json | null = null;
  app.get('/openapi.json', async () => (document ??= buildOpenApiDocument()));
}

function operation(route: ApiRoute, ref: (schema: z.ZodType) => Json): Json {
  const parameters = [...pathParameters(route.path), ...queryParameters(route.query), ...(route.headers ?? []).map((h) => ({
    name: h.name, in: 'header', required: false, description: h.description, schema: { type: 'string' },
  }))];
  const responses: Record<string, Json> = {};
  for (const [status, answer] of Object.entries(route.answers)) responses[status] = response(answer, ref);
  for (const status of route.errors) responses[String(status)] = errorResponse(status, ref);
  return {
    summary: route.summary,
    operationId: `${route.method}${route.path.replace(/[^a-zA-Z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
    tags: [route.tag],
    security: route.auth === 'none' ? [] : [{ [route.auth]: [] }],
    ...(parameters.length > 0 && { parameters }),
    ...(route.body && { requestBody: { required: true, content: { 'application/json': { schema: ref(route.body) } } } }),
    responses,
  };
}

function response(answer: ApiAnswer, ref: (schema: z.ZodType) => Json): Json {
  const content: Json = {};
  if (answer.json) content['application/json'] = { schema: ref(answer.json) };
  if (answer.media) content[answer.media] = { schema: { type: 'string' } };
  if (answer.stream) {
    content['text/event-stream'] = {
      schema: { type: 'string', description: '`data: <chunk JSON>` lines, `: ping` comments while upstreams are slow, then `data: [DONE]`' },
      'x-sse-data': { oneOf: answer.stream.map(ref) },
    };
  }
  return { description: answer.description, headers: { 'x-request-id': { schema: { type: 'string' } } }, content };
}

function errorResponse(status: number, ref: (schema: z.ZodType) => Json): Json {
  const known = ERROR_STATUSES[status];
  if (!known) throw new Error(`no description for error status ${status}`);
  return {
    description: known.description,
    headers: {
      'x-request-id': { schema: { type: 'string' } },
      ...(known.retryAfter && { 'Retry-After': { description: 'Seconds until a retry may succeed', schema: { type: 'integer' } } }),
    },
    content: { 'application/json': { schema: ref(RESPONSE_SCHEMAS.Error!) } },
  };
}

function pathParameters(path: string): Json[] {
  return [...path.matchAll(/:(\w+)/g)].map((m) => ({ name: m[1], in: 'path', required: true, schema: { type: 'string' } }));
}

function queryParameters(query: z.ZodObject | undefined): Json[] {
  if (!query) return [];
  const schema = z.toJSONSchema(query, { io: 'input', unrepresentable: 'any' }) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return { name, in: 'query', required: schema.required?.includes(name) ?? false, ...(description !== undefined && { description }), schema: rest };
  });
}

function ref(names: Map<z.ZodType, string>, schema: z.ZodType): Json {
  const name = names.get(schema);
  if (!name) throw new Error('a schema of the route table is not named in REQUEST_SCHEMAS or RESPONSE_SCHEMAS');
  return { $ref: `#/components/schemas/${name}` };
}

/** The named schemas as JSON Schema 2020-12, referring to each other by name. */
function componentSchemas(named: Record<string, z.ZodType>, io: 'input' | 'output'): Record<string, Json> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(named)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, { io, unrepresentable: 'any', uri: (id) => `#/components/schemas/${id}` });
  return Object.fromEntries(Object.entries(schemas).map(([id, schema]) => {
    const { $schema: _dialect, $id: _id, ...rest } = schema as Json;
    return [id, rest];
  }));
}

function packageVersion(): string {
  try {
    // src/http/ and dist/http/ both sit two levels under the package.
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}
