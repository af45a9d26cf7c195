/**
 * The text an operator reads: each built from the very object that `--json`
 * prints (the API's), as plain tables without colour or borders, so that they
 * also read well through `grep`, `less` and a log file.
 */
import Table from 'cli-table3';
import type { ApiKeyObject } from '../keys/issue.js';
import type { AccountsPage, AccountWithCredits, CreditsObject } from '../metering/credits.js';
import type { UsageObject } from '../metering/usage.js';

type Cell = string | number | null;

const NO_BORDERS = {
  top: '', 'top-mid': '', 'top-left': '', 'top-right': '',
  bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '',
  left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '  ',
};
const PLAIN = { 'padding-left': 0, 'padding-right': 0, head: [], border: [] };

/** Columns under a header; numbers to the right, absent values as `-`. */
export function table(head: string[], rows: Cell[][]): string {
  const numeric = head.map((_, i) => rows.length > 0 && rows.every((r) => typeof r[i] === 'number' || r[i] === null));
  const t = new Table({ head, chars: NO_BORDERS, style: PLAIN, colAligns: numeric.map((n) => (n ? 'right' : 'left')) });
  t.push(...rows.map((r) => r.map(cell)));
  return lines(t.toString());
}

/** One record, a field per line. */
export function pairs(rows: Array<[string, Cell]>): string {
  const t = new Table({ chars: NO_BORDERS, style: PLAIN });
  t.push(...rows.map(([k, v]) => ({ [k]: cell(v) })));
  return lines(t.toString());
}

export function accountsText(page: AccountsPage): string {
  if (page.data.length === 0) return 'no accounts\n';
  const rows = page.data.map((a) => [
    a.id, a.name, a.created_at, a.credits.earned_credits.balance, a.credits.purchased_credits.balance,
    a.credits.reserved_credits, a.credits.available_credits,
  ]);
  const more = page.has_more ? `more: svc-gateway accounts list --after ${page.data[page.data.length - 1]!.id}\n` : '';
  return table(['ID', 'NAME', 'CREATED', 'EARNED', 'PURCHASED', 'RESERVED', 'AVAILABLE'], rows) + more;
}

export function accountText(account: AccountWithCredits): string {
  return pairs([['account', account.id], ['name', account.name], ['created', account.created_at], ...creditRows(account.credits)]);
}

export function creditsText(credits: CreditsObject): string {
  return pairs([['account', credits.account_id], ...creditRows(credits)]);
}

function creditRows(credits: CreditsObject): Array<[string, Cell]> {
  const earned = credits.earned_credits;
  const expiry = earned.expires_at ? `${earned.expires_at} (${earned.days_remaining} days)` : null;
  return [
    ['earned', earned.balance],
    ['earned expires', expiry],
    ['purchased', credits.purchased_credits.balance],
    ['total', credits.total_credits],
    ['reserved', credits.reserved_credits],
    ['available', credits.available_credits],
  ];
}

export function keysText(keys: { data: ApiKeyObject[] }): string {
  if (keys.data.length === 0) return 'no active keys\n';
  const rows = keys.data.map((k) => [
    k.id, k.name, k.environment, k.redacted_key, k.daily_credit_limit, k.rate_limit_rpm, k.credits_spent_today, k.created_at, k.last_used_at,
  ]);
  return table(['ID', 'NAME', 'ENV', 'KEY', 'DAILY LIMIT', 'RPM', 'SPENT TODAY', 'CREATED', 'LAST USED'], rows);
}

export function usageText(usage: UsageObject, accountId: string): string {
  const head = `usage of ${accountId}, ${usage.period_start.slice(0, 10)} to ${usage.period_end.slice(0, 10)} (UTC)\n`;
  if (usage.daily.length === 0) return `${head}no settled requests\n`;
  const rows: Cell[][] = usage.daily.map((d) => [d.date, d.model, d.requests, d.prompt_tokens, d.completion_tokens, d.credits]);
  rows.push(['total', '', usage.total_requests, usage.total_prompt_tokens, usage.total_completion_tokens, usage.total_credits_spent]);
  return head + table(['DATE', 'MODEL', 'REQUESTS', 'PROMPT TOKENS', 'COMPLETION TOKENS', 'CREDITS'], rows);
}

function cell(value: Cell): string | number {
  return value === null ? '-' : value;
}

function lines(text: string): string {
  return `${text.split('\n').map((l) => l.trimEnd()).join('\n')}\n`;
}
