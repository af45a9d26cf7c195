/**
 * GET /v1/usage: settled completions of the whole account, by UTC day of
 * settlement and model alias. Dates default to the last 30 days ending today.
 */
import type { FastifyInstance } from 'fastify';
import type { Clock } from '../../../clock.js';
import { utcDay } from '../../../clock.js';
import { errors } from '../../../errors.js';
import type { Store, UsageRow } from '../../../store/types.js';
import { allowOnly, parseQuery } from '../../errors.js';
import { usageQuery, type UsageObject } from '../../schemas/account.js';

const DAY_MS = 86_400_000;
const MAX_SPAN_DAYS = 366;
const DEFAULT_SPAN_DAYS = 30;

export function usageRoutes(app: FastifyInstance, { store, clock }: { store: Store; clock: Clock }): void {
  allowOnly(app, '/usage', ['GET']);
  app.get('/usage', async (request) => {
    const q = parseQuery(usageQuery, request.query);
    const end = q.end_date === undefined ? dayStart(utcDay(clock.now())) : parseDate(q.end_date, 'end_date');
    const start = q.start_date === undefined ? new Date(end.getTime() - (DEFAULT_SPAN_DAYS - 1) * DAY_MS) : parseDate(q.start_date, 'start_date');
    if (start > end) throw errors.invalidValue('start_date', 'start_date must not be after end_date.');
    if ((end.getTime() - start.getTime()) / DAY_MS + 1 > MAX_SPAN_DAYS) {
      throw errors.invalidValue('start_date', `The period may span at most ${MAX_SPAN_DAYS} days.`);
    }
    const rows = await store.usage({
      accountId: request.caller!.accountId, from: start, until: new Date(end.getTime() + DAY_MS), model: q.model,
    });
    return rollup(start, end, rows);
  });
}

function rollup(start: Date, end: Date, rows: UsageRow[]): UsageObject {
  const breakdown: Record<string, { requests: number; credits: number }> = {};
  const totals = { requests: 0, prompt: 0, completion: 0, credits: 0 };
  for (const row of rows) {
    totals.requests += row.requests;
    totals.prompt += row.promptTokens;
    totals.completion += row.completionTokens;
    totals.credits += row.credits;
    const model = (breakdown[row.model] ??= { requests: 0, credits: 0 });
    model.requests += row.requests;
    model.credits += row.credits;
  }
  return {
    object: 'usage',
    period_start: `${utcDay(start)}T00:00:00Z`,
    period_end: `${utcDay(end)}T23:59:59Z`,
    total_requests: totals.requests,
    total_prompt_tokens: totals.prompt,
    total_completion_tokens: totals.completion,
    total_credits_spent: totals.credits,
    breakdown_by_model: breakdown,
    daily: rows.map((r) => ({
      date: r.date, model: r.model, requests: r.requests,
      prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, credits: r.credits,
    })),
  };
}

/** A YYYY-MM-DD (the schema checked the form) that must also be a calendar date. */
function parseDate(value: string, param: string): Date {
  const date = dayStart(value);
  if (Number.isNaN(date.getTime()) || utcDay(date) !== value) throw errors.invalidValue(param, `${param} is not a calendar date.`);
  return date;
}

function dayStart(day: string): Date {
  return new Date(`${day}T00:00:00Z`);
}
