/**
 * The NUL character (U+0000) never reaches the store: PostgreSQL's text cannot
 * hold it, so an id, cursor or name carrying one failed there as a 500 (SQLite
 * took it). No id, cursor, filter or name the gateway knows contains one, so a
 * caller's is refused as a bad value, the same on both stores.
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { errors } from '../errors.js';

const NUL = '\u0000';
const NUL_MESSAGE = 'must not contain the NUL character (U+0000)';

/** A string the gateway stores: at most `max` characters, no NUL. */
export function storedText(max: number) {
  return z.string().max(max).refine((s) => !s.includes(NUL), { message: NUL_MESSAGE });
}

/**
 * Refuses a path parameter or query value holding NUL with 400 invalid_value
 * naming it. Runs at preValidation, so that authentication still comes first.
 */
export function refuseNulInUrl(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    const param = nulParam(request.params) ?? nulParam(request.query);
    if (param !== null) throw errors.invalidValue(param, `${param}: ${NUL_MESSAGE}.`);
  });
}

/** The first key of `values` whose value (a string, or strings in an array) holds NUL. */
function nulParam(values: unknown): string | null {
  if (typeof values !== 'object' || values === null) return null;
  for (const [key, value] of Object.entries(values)) {
    const strings: unknown[] = Array.isArray(value) ? value : [value];
    if (key.includes(NUL) || strings.some((s) => typeof s === 'string' && s.includes(NUL))) {
      return key.includes(NUL) ? 'query' : key;
    }
  }
  return null;
}
