/**
 * svc-auto's labelled corpus (data/auto/corpus/{simple,code,complex}.jsonl, one prompt a
 * line: `{"id", "label", "messages": [{role, content}…]}`) and its one split.
 *
 * The split: each prompt goes to the held-out set when the seeded hash of its id falls in
 * the lowest HELD_OUT_SHARE of the hash range. That is a seeded shuffle of each class
 * (order by the hash, cut at 25%) which never moves a prompt from one side to the other
 * as the corpus grows, so nothing tuned on an earlier training set has seen a held-out prompt.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { ChatMessage } from '../../providers/types.js';
import { CLASSES, type PromptClass } from './model.js';

export const DEFAULT_CORPUS_DIR = new URL('../../../data/auto/corpus/', import.meta.url);
export const SPLIT_SEED = 'svc-auto-split-1';
export const HELD_OUT_SHARE = 0.25;

export interface LabelledPrompt {
  id: string;
  label: PromptClass;
  messages: ChatMessage[];
}

export interface Corpus {
  prompts: LabelledPrompt[];
  /** SHA-256 over the three files, in class order. */
  sha256: string;
}

const lineSchema = z.object({
  id: z.string().min(1),
  label: z.enum(CLASSES),
  messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string() })).min(1),
});

export class CorpusError extends Error {
  override name = 'CorpusError';
}

export function readCorpus(dir: URL = DEFAULT_CORPUS_DIR): Corpus {
  const hash = createHash('sha256');
  const prompts: LabelledPrompt[] = [];
  const ids = new Set<string>();
  for (const cls of CLASSES) {
    const file = new URL(`${cls}.jsonl`, dir);
    const text = readFileSync(file, 'utf8');
    hash.update(`${cls}.jsonl\n`).update(text);
    text.split('\n').forEach((line, n) => {
      if (line.trim() === '') return;
      const where = `${file.pathname}:${n + 1}`;
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch (err) {
        throw new CorpusError(`${where}: not JSON (${(err as Error).message})`);
      }
      const result = lineSchema.safeParse(parsed);
      if (!result.success) throw new CorpusError(`${where}: ${result.error.issues[0]?.message ?? 'invalid'}`);
      const prompt = result.data;
      if (prompt.label !== cls) throw new CorpusError(`${where}: label ${prompt.label} in the ${cls} file`);
      if (ids.has(prompt.id)) throw new CorpusError(`${where}: duplicate id ${prompt.id}`);
      ids.add(prompt.id);
      prompts.push({ id: prompt.id, label: prompt.label, messages: prompt.messages });
    });
  }
  return { prompts, sha256: hash.digest('hex') };
}

/** Where the split puts a prompt: its seeded hash as a share of the hash range. */
export function splitKey(id: string): number {
  return createHash('sha256').update(`${SPLIT_SEED}:${id}`).digest().readUInt32BE(0) / 2 ** 32;
}

/** Training and held-out sets, each in id order. */
export function split(prompts: readonly LabelledPrompt[]): { training: LabelledPrompt[]; heldOut: LabelledPrompt[] } {
  const sorted = [...prompts].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return {
    training: sorted.filter((p) => splitKey(p.id) >= HELD_OUT_SHARE),
    heldOut: sorted.filter((p) => splitKey(p.id) < HELD_OUT_SHARE),
  };
}
