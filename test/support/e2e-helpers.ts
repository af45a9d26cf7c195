/**
 * Helpers for end-to-end tests through the openai SDK: firing many
 * completions at once and classifying the outcomes, reading the gateway's own
 * endpoints, and running the `ledger verify` CLI as an operator would.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import type { TestGateway } from './gateway.js';
import type { Svc } from '../../src/gateway/chat-types.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export type Outcome =
  | { status: 200; svc: Svc; content: string }
  | { status: number; code: string | null | undefined; type: string | undefined; message: string };

/** The `svc` field if there is one (a stream carries it only on its last chunks). */
export function svcIfAny(value: unknown): Svc | undefined {
  return (value as { svc?: Svc }).svc;
}

/** One completion, JSON or streamed, reduced to its status and what it cost. */
export async function completionOutcome(client: OpenAI, params: ChatCompletionCreateParamsNonStreaming, stream: boolean): Promise<Outcome> {
  try {
    if (!stream) {
      const completion = await client.chat.completions.create(params);
      const svc = svcIfAny(completion);
      if (!svc) throw new Error('completion without svc');
      return { status: 200, svc, content: completion.choices[0]?.message.content ?? '' };
    }
    const chunks = await client.chat.completions.create({ ...params, stream: true });
    let svc: Svc | undefined;
    let content = '';
    for await (const chunk of chunks) {
      content += chunk.choices[0]?.delta.content ?? '';
      svc = svcIfAny(chunk) ?? svc;
      if ((chunk as { error?: unknown }).error) throw new Error(`stream failed: ${JSON.stringify(chunk)}`);
    }
    if (!svc) throw new Error('stream ended without svc');
    return { status: 200, svc, content };
  } catch (err) {
    if (err instanceof OpenAI.APIError && err.status !== undefined) {
      return { status: err.status, code: err.code, type: err.type, message: err.message };
    }
    throw err;
  }
}

export function statusCounts(outcomes: Outcome[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const o of outcomes) counts[o.status] = (counts[o.status] ?? 0) + 1;
  return counts;
}

export function successes(outcomes: Outcome[]): Array<Extract<Outcome, { status: 200 }>> {
  return outcomes.filter((o): o is Extract<Outcome, { status: 200 }> => o.status === 200 && 'svc' in o);
}

export async function getJson<T>(gw: TestGateway, key: string, path: string): Promise<T> {
  const response = await fetch(`${gw.baseURL}${path}`, { headers: { authorization: `Bearer ${key}` } });
  if (response.status !== 200) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

export { credits } from './e2e.js';

/** Polls until `check` holds; a synchronisation point, not a timing assertion. */
export async function waitFor<T>(read: () => Promise<T>, check: (value: T) => boolean, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}; last seen ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** `svc-gateway ledger verify --database <url> --json`, run as its own process; a bare path means an SQLite file. */
export function ledgerVerifyCli(database: string): Promise<CliResult> {
  const url = /^(sqlite:|postgres(ql)?:)/.test(database) ? database : `sqlite:${database}`;
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/main.ts', 'ledger', 'verify', '--database', url, '--json'],
      { cwd: ROOT }, (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      });
  });
}
