/**
 * What the fake Gemini upstream refuses with a 400, as Gemini does: unknown
 * fields, roles other than `user`/`model`, turns of one role in a row, empty
 * texts, a missing `generationConfig.maxOutputTokens`, function results that do
 * not answer the calls of the turn before them, and (as Gemini 3 does) a model
 * turn whose first function call has no thought signature.
 */
type Json = Record<string, unknown>;

const TOP_LEVEL = new Set(['contents', 'systemInstruction', 'generationConfig', 'tools', 'toolConfig', 'safetySettings', 'cachedContent']);
const GENERATION_CONFIG = new Set([
  'maxOutputTokens', 'temperature', 'topP', 'topK', 'stopSequences', 'seed', 'presencePenalty', 'frequencyPenalty',
  'responseMimeType', 'responseSchema', 'responseJsonSchema', 'candidateCount', 'thinkingConfig',
]);
const PART_KEYS = new Set(['text', 'functionCall', 'functionResponse', 'thought', 'thoughtSignature']);
const FUNCTION_NAME = /^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$/;

export function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Why Gemini would refuse this body, or null. */
export function invalidBody(body: Json): string | null {
  const unknown = Object.keys(body).find((key) => !TOP_LEVEL.has(key));
  if (unknown !== undefined) return `Invalid JSON payload received. Unknown name "${unknown}"`;
  return invalidSystem(body.systemInstruction) ?? invalidContents(body.contents) ?? invalidConfig(body.generationConfig)
    ?? invalidTools(body.tools) ?? invalidToolConfig(body.toolConfig);
}

function invalidSystem(system: unknown): string | null {
  if (system === undefined) return null;
  if (!isObject(system) || !Array.isArray(system.parts) || system.parts.length === 0) return 'systemInstruction must have parts';
  const ok = system.parts.every((part) => isObject(part) && typeof part.text === 'string' && part.text !== '');
  return ok ? null : 'systemInstruction parts must be non-empty texts';
}

function invalidContents(contents: unknown): string | null {
  if (!Array.isArray(contents) || contents.length === 0) return '* GenerateContentRequest.contents: contents is not specified';
  let previous: Json | null = null;
  for (const [i, content] of contents.entries()) {
    if (!isObject(content) || (content.role !== 'user' && content.role !== 'model')) {
      return `contents[${i}].role: Please use a valid role: user, model.`;
    }
    if (!Array.isArray(content.parts) || content.parts.length === 0) return `contents[${i}].parts must not be empty`;
    if (previous?.role === content.role) return `contents[${i}]: Please ensure that multiturn requests alternate between user and model.`;
    const partProblem = content.parts.map((part, j) => invalidPart(part, content.role as string, `contents[${i}].parts[${j}]`)).find((p) => p !== null);
    if (partProblem) return partProblem;
    const calls = invalidCalls(content, previous, i);
    if (calls) return calls;
    previous = content;
  }
  return null;
}

function invalidPart(part: unknown, role: string, at: string): string | null {
  if (!isObject(part)) return `${at} must be an object`;
  const unknown = Object.keys(part).find((key) => !PART_KEYS.has(key));
  if (unknown !== undefined) return `${at}: Unknown name "${unknown}"`;
  const kinds = ['text', 'functionCall', 'functionResponse'].filter((key) => part[key] !== undefined);
  if (kinds.length !== 1) return `${at} must hold exactly one of text, functionCall, functionResponse`;
  if (part.text !== undefined && (typeof part.text !== 'string' || part.text === '')) return `${at}: Unable to submit request because it has an empty text parameter.`;
  const call = part.functionCall;
  if (call !== undefined) {
    if (role !== 'model') return `${at}: a functionCall belongs to a model turn`;
    if (!isObject(call) || typeof call.name !== 'string' || (call.args !== undefined && !isObject(call.args))) return `${at}.functionCall is invalid`;
  }
  const result = part.functionResponse;
  if (result !== undefined) {
    if (role !== 'user') return `${at}: a functionResponse belongs to a user turn`;
    if (!isObject(result) || typeof result.name !== 'string' || !isObject(result.response)) return `${at}.functionResponse needs a name and an object response`;
  }
  return null;
}

function partsOf(content: Json | null, key: 'functionCall' | 'functionResponse'): Json[] {
  const parts = content && Array.isArray(content.parts) ? content.parts : [];
  return parts.filter(isObject).filter((part) => part[key] !== undefined);
}

function nameOf(part: Json, key: 'functionCall' | 'functionResponse'): string {
  const inner = part[key];
  return isObject(inner) && typeof inner.name === 'string' ? inner.name : '';
}

function invalidCalls(content: Json, previous: Json | null, i: number): string | null {
  const calls = partsOf(content, 'functionCall');
  if (calls.length > 0 && typeof calls[0]!.thoughtSignature !== 'string') {
    return `contents[${i}]: Function call is missing a thought_signature in functionCall parts.`;
  }
  const results = partsOf(content, 'functionResponse');
  if (results.length === 0) return null;
  const asked = partsOf(previous, 'functionCall').map((part) => nameOf(part, 'functionCall')).sort();
  const answered = results.map((part) => nameOf(part, 'functionResponse')).sort();
  if (asked.join('\n') !== answered.join('\n')) {
    return `contents[${i}]: Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.`;
  }
  return null;
}

function invalidConfig(config: unknown): string | null {
  if (!isObject(config)) return 'generationConfig.maxOutputTokens is required by this fake';
  const unknown = Object.keys(config).find((key) => !GENERATION_CONFIG.has(key));
  if (unknown !== undefined) return `generationConfig: Unknown name "${unknown}"`;
  const { maxOutputTokens: max, temperature, topP, stopSequences: stops } = config;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < 1) return 'generationConfig.maxOutputTokens is required by this fake';
  if (temperature !== undefined && (typeof temperature !== 'number' || temperature < 0 || temperature > 2)) return 'temperature must be in [0, 2]';
  if (topP !== undefined && (typeof topP !== 'number' || topP < 0 || topP > 1)) return 'topP must be in [0, 1]';
  if (stops !== undefined && (!Array.isArray(stops) || stops.length > 5 || !stops.every((s) => typeof s === 'string'))) return 'stopSequences: at most 5 strings';
  if (config.responseJsonSchema !== undefined) {
    if (config.responseSchema !== undefined) return 'responseJsonSchema and responseSchema are mutually exclusive';
    if (config.responseMimeType !== 'application/json') return 'responseJsonSchema needs responseMimeType application/json';
  }
  return null;
}

function invalidTools(tools: unknown): string | null {
  if (tools === undefined) return null;
  if (!Array.isArray(tools)) return 'tools must be a list';
  for (const tool of tools) {
    if (!isObject(tool) || !Array.isArray(tool.functionDeclarations)) return 'tools[]: Unknown tool';
    for (const fn of tool.functionDeclarations) {
      if (!isObject(fn) || typeof fn.name !== 'string' || !FUNCTION_NAME.test(fn.name)) return 'functionDeclarations[].name is invalid';
      if (fn.parameters !== undefined && fn.parametersJsonSchema !== undefined) return 'parameters and parametersJsonSchema are mutually exclusive';
    }
  }
  return null;
}

function invalidToolConfig(config: unknown): string | null {
  if (config === undefined) return null;
  const calling = isObject(config) ? config.functionCallingConfig : undefined;
  if (!isObject(calling) || !['AUTO', 'ANY', 'NONE', 'VALIDATED'].includes(String(calling.mode))) return 'toolConfig.functionCallingConfig.mode is invalid';
  if (calling.allowedFunctionNames !== undefined && calling.mode !== 'ANY') return 'allowedFunctionNames only with mode ANY';
  return null;
}
