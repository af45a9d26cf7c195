/**
 * What every command shares: where it writes, how it fails (and so its exit
 * code), the store it opens, and the checks on option values.
 */
import { DEFAULT_DATABASE_URL, openStore } from '../store/open.js';
import type { Account, Store } from '../store/types.js';

/** Exit codes, as the README's CLI reference lists them. */
export const EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** A bad command line: unknown option, missing or malformed value. Exit code 2. */
export class CliError extends Error {
  override name = 'CliError';
}

/** What the command names does not exist (an account, a key). Exit code 1. */
export class NotFoundError extends Error {
  override name = 'NotFoundError';
}

export interface Io {
  env: Readonly<Record<string, string | undefined>>;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
}

/** Option values as commander gives them (camelCase keys). */
export type Values = Record<string, unknown>;

/** Commander flags, their help, and whether the command needs it (checked by the command, for its own message). */
export type OptionSpec = [flags: string, help: string, required?: boolean];

export interface CommandSpec {
  /** One word, or a group and an action: `credits grant`. */
  name: string;
  summary: string;
  /** `--database` and `--json` are added to every command. */
  options: OptionSpec[];
  run(v: Values, io: Io): Promise<number>;
}

export function databaseUrl(v: Values, io: Io): string {
  return str(v.database) ?? io.env.DATABASE_URL ?? DEFAULT_DATABASE_URL;
}

export async function withStore(v: Values, io: Io, run: (store: Store) => Promise<number>): Promise<number> {
  const store = await openStore(databaseUrl(v, io));
  try {
    return await run(store);
  } finally {
    await store.close();
  }
}

/** `--json`: the object as the API answers it; else the text built from that same object. */
export function print(v: Values, io: Io, json: unknown, text: string): number {
  io.out.write(v.json ? `${JSON.stringify(json, null, 2)}\n` : text);
  return EXIT.ok;
}

export async function existingAccount(store: Store, id: string): Promise<Account> {
  const account = await store.getAccount(id);
  if (!account) throw new NotFoundError(`no account ${id}`);
  return account;
}

export function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function required(v: Values, name: string): string {
  const value = str(v[camel(name)]);
  if (value === undefined || value === '') throw new CliError(`--${name} is required`);
  return value;
}

export function integer(text: string, name: string): number {
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) throw new CliError(`${name} must be a non-negative integer, got '${text}'`);
  return Number(text);
}

export function positive(value: number, flag: string): number {
  if (value < 1) throw new CliError(`${flag} must be at least 1 (requests per minute)`);
  return value;
}

export function parseInstant(text: string): Date {
  const date = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}/.test(text) || Number.isNaN(date.getTime())) throw new CliError(`--expires-at must be an ISO 8601 time, got '${text}'`);
  return date;
}

/** `expires_at` → `--expires-at`: an API parameter named as the option that carries it. */
export function flag(param: string): string {
  return `--${param.replace(/_/g, '-')}`;
}

function camel(name: string): string {
  return name.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}
