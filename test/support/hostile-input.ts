/**
 * fast-check arbitraries for hostile requests to the gateway: chat-completions
 * bodies that are always invalid (malformed JSON, one field of a valid body given
 * a value its schema refuses, deep nesting, duplicate keys, invalid UTF-8),
 * headers, paths and methods. A body here never passes validation with a
 * served alias, so a request carrying it can never reach the ledger.
 */
import fc from 'fast-check';

/** The aliases the test gateway serves: an "unknown model" is never one of them. */
export const ALIASES = ['svc-auto', 'svc-fast', 'svc-code', 'svc-smart'];

const text = fc.string({ maxLength: 40, unit: 'grapheme' });
const jsonString = text.map((s) => JSON.stringify(s));
/** Numbers as JSON text, some past what a double holds (1e999 parses to Infinity). */
const numberLiteral = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.integer().map(String),
  fc.constantFrom('1e999', '-1e999', '-0', '1E400', '0.0000001', '9007199254740993', '-9007199254740993', '1e20', '-1'),
);
const nanLikeString = fc.constantFrom('"NaN"', '"Infinity"', '"-Infinity"', '"1e999"', '"-1"', '"0x10"', '"1"', '""', '" "');
const smallJson = fc.json({ maxDepth: 3 });
const arrayLiteral = fc.array(smallJson, { maxLength: 4 }).map((items) => `[${items.join(',')}]`);
const objectLiteral = fc.dictionary(text, smallJson, { maxKeys: 4 })
  .map((o) => `{${Object.entries(o).map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`);
const boolLiteral = fc.constantFrom('true', 'false');

type JsonKind = 'string' | 'number' | 'bool' | 'array' | 'object';
const BY_KIND: Record<JsonKind, fc.Arbitrary<string>> = {
  string: fc.oneof(jsonString, nanLikeString), number: numberLiteral, bool: boolLiteral, array: arrayLiteral, object: objectLiteral,
};

/** Values of every JSON kind except those `accepts` could take; then the field's own refused values. */
function wrongFor(accepts: JsonKind[], ownInvalid: fc.Arbitrary<string>[] = []): fc.Arbitrary<string> {
  const kinds = (Object.keys(BY_KIND) as JsonKind[]).filter((k) => !accepts.includes(k));
  return fc.oneof(...kinds.map((k) => BY_KIND[k]), ...ownInvalid);
}

/** Doubles outside [min, max], as JSON text. */
const outside = (min: number, max: number) => fc.oneof(
  fc.double({ max: min, maxExcluded: true, noNaN: true, noDefaultInfinity: true }),
  fc.double({ min: max, minExcluded: true, noNaN: true, noDefaultInfinity: true }),
).map((n) => JSON.stringify(n));
/** Numbers an `int().min(1)` refuses: zero, negatives, fractions. */
const notPositiveInt = fc.oneof(
  fc.integer({ max: 0 }).map(String),
  fc.double({ min: -1e12, max: 1e12, noNaN: true }).filter((n) => !Number.isInteger(n)).map((n) => JSON.stringify(n)),
  fc.constantFrom('-1e999', '0.5', '-0.0001'),
);
const fraction = fc.double({ min: -1e9, max: 1e9, noNaN: true }).filter((n) => !Number.isInteger(n)).map((n) => JSON.stringify(n));
const unknownModel = text.filter((s) => s !== '' && !ALIASES.includes(s)).map((s) => JSON.stringify(`x-${s}`));

const badMessage = fc.oneof(
  fc.constant('{}'),
  text.map((s) => JSON.stringify({ role: s === 'user' ? 'robot' : `r-${s}`, content: 'hi' })),
  fc.constant('{"role":"user"}'),
  fc.constant('{"role":"user","content":null}'),
  wrongFor(['string', 'array']).map((c) => `{"role":"user","content":${c}}`),
  fc.constant('{"role":"tool","content":"x"}'),
  fc.constant('{"role":"user","content":[{"type":"image_url","image_url":"x"}]}'),
  fc.constant('{"role":"user","content":[{"type":"text"}]}'),
  fc.constant('{"role":"assistant","tool_calls":[{"id":1}]}'),
  wrongFor(['object']),
);

/** Each field of the schema, with values it refuses (null is left out: every optional field takes it). */
export const WRONG_FIELD_VALUES: Record<string, fc.Arbitrary<string>> = {
  model: fc.oneof(wrongFor(['string']), fc.constant('""')),
  messages: fc.oneof(
    wrongFor(['array']), fc.constant('[]'),
    fc.tuple(fc.array(fc.constant('{"role":"user","content":"ok"}'), { maxLength: 3 }), badMessage).map(([ok, bad]) => `[${[...ok, bad].join(',')}]`),
  ),
  temperature: wrongFor(['number'], [outside(0, 2), fc.constant('1e999')]),
  top_p: wrongFor(['number'], [outside(0, 1)]),
  max_tokens: wrongFor(['number'], [notPositiveInt]),
  max_completion_tokens: wrongFor(['number'], [notPositiveInt]),
  stream: wrongFor(['bool']),
  stream_options: fc.oneof(wrongFor(['object']), wrongFor(['bool']).map((v) => `{"include_usage":${v}}`)),
  stop: fc.oneof(
    wrongFor(['string', 'array']),
    fc.array(jsonString, { minLength: 5, maxLength: 8 }).map((a) => `[${a.join(',')}]`),
    wrongFor(['string']).map((v) => `["ok",${v}]`),
  ),
  n: fc.oneof(wrongFor(['number']), fc.integer().filter((n) => n !== 1).map(String), fc.constant('1.5')),
  presence_penalty: wrongFor(['number'], [outside(-2, 2)]),
  frequency_penalty: wrongFor(['number'], [outside(-2, 2)]),
  seed: wrongFor(['number'], [fraction]),
  user: wrongFor(['string']),
  response_format: fc.oneof(wrongFor(['object']), fc.constant('{}'), text.map((s) => `{"type":${JSON.stringify(`t-${s}`)}}`)),
  tools: fc.oneof(
    wrongFor(['array']), fc.constant('[{}]'), fc.constant('[{"type":"function"}]'), fc.constant('[{"type":"function","function":{}}]'),
    wrongFor(['object']).map((v) => `[${v}]`),
  ),
  tool_choice: fc.oneof(wrongFor(['string', 'object']), text.map((s) => JSON.stringify(`c-${s}`)), fc.constant('{}'), fc.constant('{"type":5}')),
  parallel_tool_calls: wrongFor(['bool']),
};

/** Optional fields with values the schema takes, to mix in around the broken one. */
const validExtras = fc.record({
  temperature: fc.double({ min: 0, max: 2, noNaN: true }),
  max_tokens: fc.integer({ min: 1, max: 64 }),
  stream: fc.boolean(),
  user: text,
  stop: fc.array(text, { maxLength: 4 }),
}, { requiredKeys: [] });

const validBase = fc.record({
  model: fc.constantFrom(...ALIASES),
  messages: fc.array(fc.record({ role: fc.constantFrom('user', 'system', 'developer'), content: text }), { minLength: 1, maxLength: 3 }),
}).chain((base) => validExtras.map((extras) => ({ ...extras, ...base })));

/** A valid body with one field replaced by (or given) a value its schema refuses. */
const oneFieldWrong = fc.tuple(validBase, fc.constantFrom(...Object.keys(WRONG_FIELD_VALUES)))
  .chain(([base, field]) => WRONG_FIELD_VALUES[field]!.map((literal) => {
    const rest = Object.fromEntries(Object.entries(base).filter(([k]) => k !== field));
    const head = JSON.stringify(rest).slice(0, -1);
    return `${head}${head.length > 1 ? ',' : ''}${JSON.stringify(field)}:${literal}}`;
  }));

/** A body lacking `model` or `messages`, or with an unknown alias (404, nothing reserved). */
const missingOrUnknown = validBase.chain((base) => fc.oneof(
  fc.constant(JSON.stringify({ ...base, model: undefined })),
  fc.constant(JSON.stringify({ ...base, messages: undefined })),
  unknownModel.map((m) => JSON.stringify({ ...base, model: JSON.parse(m) as string })),
));

/** Malformed JSON: a valid body cut short, with junk after it, or written in JavaScript instead of JSON. */
const malformed = fc.oneof(
  fc.tuple(validBase, fc.nat()).map(([b, n]) => {
    const t = JSON.stringify(b);
    return t.slice(0, n % t.length);
  }),
  validBase.chain((b) => fc.constantFrom('x', '}', ',', ']', '{}', ' null', '\u0000').map((junk) => JSON.stringify(b) + junk)),
  validBase.map((b) => JSON.stringify(b).replace(/"/g, "'")),
  validBase.map((b) => `{"max_tokens": NaN, ${JSON.stringify(b).slice(1)}`),
  validBase.map((b) => `/* c */ ${JSON.stringify(b)}`),
  fc.string({ maxLength: 200, unit: 'binary' }).filter((s) => s.trim() !== ''),
  fc.constantFrom('{', '[', '"', 'nul', 'tru', '{"model":', '{"a":1,}', '[1,2', '\uFEFF{}', '{"messages":[{"role":"user","content":"\\x41"}]}'),
);

/** JSON that parses but is not a chat request: scalars, arrays, objects of noise. */
const notARequest = fc.oneof(fc.json({ maxDepth: 4 }), fc.constant('{}'), fc.constant('[]'), fc.constant('null'));

/** Nested far past the gateway's depth bound, at the top or under a field. */
const deepNesting = fc.tuple(fc.integer({ min: 129, max: 20_000 }), fc.constantFrom('[', '{"a":'), fc.constantFrom('top', 'messages', 'tools', 'response_format'))
  .map(([depth, open, where]) => {
    const close = open === '[' ? ']' : '}';
    const deep = `${open.repeat(depth)}1${close.repeat(depth)}`;
    return where === 'top' ? deep : `{"model":"svc-fast","messages":[{"role":"user","content":"hi"}],"${where}":${deep}}`;
  });

/** Duplicate keys: JSON.parse keeps the last, and the last one is always refused. */
const duplicateKeys = fc.tuple(validBase, fc.constantFrom(...Object.keys(WRONG_FIELD_VALUES)))
  .chain(([base, field]) => WRONG_FIELD_VALUES[field]!.map((literal) => {
    const valid = JSON.stringify(base).slice(0, -1);
    return `${valid},${JSON.stringify(field)}:${literal}}`;
  }));

export type GeneratedBody = { kind: string; bytes: Buffer };

const asText = (kind: string) => (s: string): GeneratedBody => ({ kind, bytes: Buffer.from(s, 'utf8') });

/**
 * Invalid UTF-8 inside a refused body: in the model name (an unknown alias once
 * decoded with replacement characters), in a role, or as a body of raw bytes.
 */
const invalidUtf8 = fc.tuple(fc.uint8Array({ minLength: 1, maxLength: 16 }).map((b) => Buffer.from(b.map((x) => x | 0x80))), fc.constantFrom('model', 'role', 'raw'))
  .map(([bad, where]): GeneratedBody => {
    const parts = where === 'model'
      ? ['{"model":"x-', '","messages":[{"role":"user","content":"hi"}]}']
      : where === 'role' ? ['{"model":"svc-fast","messages":[{"role":"u', '","content":"hi"}]}'] : ['', ''];
    return { kind: `utf8-${where}`, bytes: Buffer.concat([Buffer.from(parts[0]!), bad, Buffer.from(parts[1]!)]) };
  });

/** Every kind of refused chat-completions body, as the bytes sent. */
export const hostileChatBody: fc.Arbitrary<GeneratedBody> = fc.oneof(
  { weight: 6, arbitrary: oneFieldWrong.map(asText('wrong-field')) },
  { weight: 2, arbitrary: missingOrUnknown.map(asText('missing-or-unknown')) },
  { weight: 3, arbitrary: malformed.map(asText('malformed')) },
  { weight: 1, arbitrary: notARequest.map(asText('not-a-request')) },
  { weight: 1, arbitrary: deepNesting.map(asText('deep')) },
  { weight: 2, arbitrary: duplicateKeys.map(asText('duplicate-keys')) },
  { weight: 1, arbitrary: invalidUtf8 },
);

/** Content types, odd ones and none. */
export const contentTypes: fc.Arbitrary<string[]> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<string[]>(['application/json']) },
  { weight: 3, arbitrary: fc.constantFrom<string[]>(
    [], ['text/plain'], ['application/json; charset=latin1'], ['application/x-www-form-urlencoded'],
    ['multipart/form-data; boundary=xyz'], ['application/octet-stream'], ['application/json', 'text/plain'],
    ['*/*'], [''], ['application/json; charset=utf-16'], ['application/vnd.api+json'],
  ) },
  { weight: 1, arbitrary: fc.string({ maxLength: 60, unit: 'binary-ascii' }).filter((s) => !/[\r\n]/.test(s)).map((s) => [s]) },
);

/** Random path segments: words, encoded bytes, dot segments, junk. */
export const pathSegment: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('v1', 'admin', 'chat', 'completions', 'models', 'credits', 'usage', 'api-keys', 'accounts', 'grants', 'upstreams', '..', '.', '', 'healthz'),
  fc.constantFrom('%2e%2e', '%2F', '%00', '%ff', '%', '%zz', '%E2%82', '%C0%AF', ';', '~', '%20', '*', '@', '$', 'svc-fast'),
  fc.stringMatching(/^[A-Za-z0-9._~-]{1,24}$/),
  fc.string({ maxLength: 12, unit: 'binary' }).map((s) => encodeURIComponent(s)),
);

export const queryJunk: fc.Arbitrary<string> = fc.oneof(
  fc.constant(''),
  fc.constantFrom('?', '?a', '?limit=-1', '?limit=1e999', '?after=%00', '?%%', '?a=1&a=2', '?period=%ff', '?start=2026-13-45', '?x[]=1&x[y]=2', '#frag'),
  fc.array(fc.tuple(fc.stringMatching(/^[a-z_]{1,10}$/), fc.string({ maxLength: 20 })), { maxLength: 5 })
    .map((pairs) => `?${pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&')}`),
);

/**
 * A valid body whose reservation passes 1 credit (max_tokens ≥ 100 on every
 * alias): an account holding 1 credit gets 402 after its Idempotency-Key claim,
 * which is then abandoned, so the header's checks and the claim run with nothing to pay.
 */
export const unaffordableChatBody: fc.Arbitrary<Buffer> = fc.tuple(validBase, fc.integer({ min: 100, max: 5000 }))
  .map(([base, maxTokens]) => Buffer.from(JSON.stringify({ ...base, max_tokens: maxTokens })));
