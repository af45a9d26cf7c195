/**
 * The usage rollup: settled completions of one account, by UTC day of
 * settlement and model alias. Shared by `GET /v1/usage` and `svc-gateway usage`,
 * so that both validate the period alike and answer the same object.
 */
import { utcDay } from '../clock.js';
import type { UsageObject } from '../http/schemas/account.js';
import type { Store, UsageRow } from '../store/types.js';

export type { UsageObject };

const DAY_MS = 86_400_000;
export const MAX_SPAN_DAYS = 366;
export const DEFAULT_SPAN_DAYS = 30;

export interface UsagePeriodInput {
  start_date?: unknown;
  end_date?: unknown;
}

/** Whole UTC days, both included; or why the dates are refused, naming the parameter. */
export type UsagePeriod =
  | { ok: true; start: Date; end: Date }
  | { ok: false; param: 'start_date' | 'end_date'; message: string };


/** The period asked for; by default the last 30 days ending today (UTC). */
export function usagePeriod(input: UsagePeriodInput, now: Date): UsagePeriod {
  const end = input.end_date === undefined ? dayStart(utcDay(now)) : parseDate(input.end_date, 'end_date');
  if (!(end instanceof Date)) return end;
  const start = input.start_date === undefined
    ? new Date(end.getTime() - (DEFAULT_SPAN_DAYS - 1) * DAY_MS)
    : parseDate(input.start_date, 'start_date');
  if (!(start instanceof Date)) return start;
  if (start > end) return { ok: false, param: 'start_date', message: 'start_date must not be after end_date.' };
  if ((end.getTime() - start.getTime()) / DAY_MS + 1 > MAX_SPAN_DAYS) {
    return { ok: false, param: 'start_date', message: `The period may span at most ${MAX_SPAN_DAYS} days.` };
  }
  return { ok: true, start, end };
}

/** Reads the account's settled usage over a valid period and rolls it up. */
export async function accountUsage(
  store: Store, accountId: string, period: { start: Date; end: Date }, model?: string,
): Promise<UsageObject> {
  const rows = await store.usage({ accountId, from: period.start, until: new Date(period.end.getTime() + DAY_MS), model });
  return usageRollup(period.start, period.end, rows);
}

export function usageRollup(start: Date, end: Date, rows: UsageRow[]): UsageObject {
  const breakdown: UsageObject['breakdown_by_model'] = {};
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

function parseDate(value: unknown, param: 'start_date' | 'end_date'): Date | Extract<UsagePeriod, { ok: false }> {
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(value)) {
    return { ok: false, param, message: `${param} must be a date as YYYY-MM-DD.` };
  }
  const date = dayStart(value);
  if (Number.isNaN(date.getTime()) || utcDay(date) !== value) return { ok: false, param, message: `${param} is not a calendar date.` };
  return date;
}

function dayStart(day: string): Date {
  return new Date(`${day}T00:00:00Z`);
}
