/**
 * The request's sampling, bounds and output format as Gemini's
 * `generationConfig`. The output bound is always sent; a field the route's
 * model refuses (`params.refuses`, by OpenAI wire name) never is.
 *
 * `response_format`: `json_object` → `responseMimeType: application/json`;
 * `json_schema` → the same plus `responseJsonSchema`, the schema as given
 * (Gemini's JSON Schema field; `responseSchema` takes only its OpenAPI subset).
 * `text` asks for nothing.
 */
import { isRecord } from '../http.js';
import type { UpstreamRequest } from '../types.js';

/** Whether Gemini can honour this `response_format`. */
export function supportsResponseFormat(format: Record<string, unknown>): boolean {
  if (format.type === 'text' || format.type === 'json_object') return true;
  if (format.type !== 'json_schema') return false;
  const spec = format.json_schema;
  // OpenAI's own rules: `json_schema` is an object, its `schema` (when given) an object.
  return isRecord(spec) && (spec.schema === undefined || isRecord(spec.schema));
}

export function toGenerationConfig(request: UpstreamRequest): Record<string, unknown> {
  const refuses = new Set(request.params.refuses);
  const sends = (field: string, value: unknown): boolean => value !== undefined && !refuses.has(field);
  const config: Record<string, unknown> = { maxOutputTokens: request.maxTokens };
  if (sends('temperature', request.temperature)) config.temperature = request.temperature;
  if (sends('top_p', request.topP)) config.topP = request.topP;
  if (sends('stop', request.stop)) config.stopSequences = request.stop;
  if (sends('seed', request.seed)) config.seed = request.seed;
  if (sends('presence_penalty', request.presencePenalty)) config.presencePenalty = request.presencePenalty;
  if (sends('frequency_penalty', request.frequencyPenalty)) config.frequencyPenalty = request.frequencyPenalty;
  if (sends('response_format', request.responseFormat)) Object.assign(config, responseFormatConfig(request.responseFormat!));
  return config;
}

function responseFormatConfig(format: Record<string, unknown>): Record<string, unknown> {
  if (!supportsResponseFormat(format)) throw new TypeError(`gemini: a response_format it cannot write`);
  if (format.type === 'json_object') return { responseMimeType: 'application/json' };
  if (format.type !== 'json_schema') return {};
  const schema = isRecord(format.json_schema) ? format.json_schema.schema : undefined;
  return { responseMimeType: 'application/json', ...(schema !== undefined && { responseJsonSchema: schema }) };
}
