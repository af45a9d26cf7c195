/**
 * How a route's model takes parameters, and whether a route can honour a
 * request at all. Models that need it say so in their route's `params`; the
 * families known to refuse the usual parameters get built-in defaults.
 */
import type { RouteConfig } from '../config.js';
import { DEFAULT_ROUTE_PARAMS, type RouteParams, type UpstreamRequest } from '../providers/types.js';
import { errors } from '../errors.js';
import type { ChatRequest } from './chat-types.js';
import type { RouteRequest } from './failover.js';
import type { Candidate, RoutePlan } from './router.js';

/**
 * OpenAI's reasoning models (o1, o3, o4-mini…, gpt-5…) take the output bound as
 * `max_completion_tokens` and refuse any sampling parameter but the default.
 */
const REASONING_MODEL = /^(?:[\w.-]{1,64}\/)?(?:o\d|gpt-5)(?:$|[-.])/;
const REASONING_PARAMS = {
  maxTokensField: 'max_completion_tokens',
  refuses: ['temperature', 'top_p', 'presence_penalty', 'frequency_penalty'],
} as const;

export function routeParams(route: RouteConfig): RouteParams {
  const family = REASONING_MODEL.test(route.model) ? REASONING_PARAMS : DEFAULT_ROUTE_PARAMS;
  return {
    maxTokensField: route.params?.max_tokens_field ?? family.maxTokensField,
    refuses: route.params?.refuses ?? family.refuses,
    continue: route.continue ?? false,
  };
}

/** The request fields, by wire name, that the caller set (the gateway's own defaults are not the caller's). */
function callerFields(request: Omit<UpstreamRequest, 'model' | 'params'>): string[] {
  const fields: string[] = [];
  if (request.callerSet.temperature) fields.push('temperature');
  if (request.callerSet.topP) fields.push('top_p');
  if (request.presencePenalty !== undefined) fields.push('presence_penalty');
  if (request.frequencyPenalty !== undefined) fields.push('frequency_penalty');
  if (request.seed !== undefined) fields.push('seed');
  if (request.stop !== undefined) fields.push('stop');
  return fields;
}

/** The first field of the request this route cannot honour (its model refuses it, or its provider cannot carry it), or null. */
export function unhonoured(candidate: Candidate, request: Omit<UpstreamRequest, 'model' | 'params'>): string | null {
  const refused = callerFields(request).find((field) => candidate.params.refuses.includes(field));
  return refused ?? candidate.provider.unsupported({ ...request, model: candidate.model, params: candidate.params });
}

/**
 * The plan without the routes that cannot honour the request (a field their
 * model refuses or their provider cannot carry): skipped, never served without
 * it. When none can, a 400 names the field.
 */
export function honouring(plan: RoutePlan, request: ChatRequest): RoutePlan {
  const probe = routeRequest(request, request.maxTokens ?? 1);
  let refused: string | null = null;
  const candidates = plan.candidates.filter((candidate) => {
    const field = unhonoured(candidate, probe);
    refused ??= field;
    return field === null;
  });
  if (candidates.length === 0 && refused !== null) {
    throw errors.invalidValue(refused, `No route of this model can honour "${refused}" as this request sends it; change it or choose another model.`);
  }
  return { ...plan, candidates };
}

/** The request as every route gets it, with the output bound the reservation allows. */
export function routeRequest(r: ChatRequest, maxTokens: number): RouteRequest {
  return {
    messages: r.messages, maxTokens, temperature: r.temperature, topP: r.topP, callerSet: r.callerSet,
    stop: r.stop, seed: r.seed, presencePenalty: r.presencePenalty, frequencyPenalty: r.frequencyPenalty,
    user: r.user, responseFormat: r.responseFormat, tools: r.tools, toolChoice: r.toolChoice, parallelToolCalls: r.parallelToolCalls,
  };
}
