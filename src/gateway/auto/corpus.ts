/**
 * svc-auto's labelled corpus (data/auto/corpus/{simple,code,complex}.jsonl, one prompt a
 * line: `{"id", "label", "messages": [{role, content}…]}`) and its one split.
 *
 * Beside it, data/auto/corpus/augmented.jsonl: training prompts said again another way
 * (the shipped file holds translations into other languages), each naming its `source`.
 * They only ever train: a source must be a training prompt with the same label, so no
 * held-out prompt has a copy on the training side. They are not counted as corpus
 * prompts, and cross-validation keeps each one in its source's fold.
 *
 * The split: each prompt goes to the held-out set when the seeded hash of its id falls in
 * the lowest HELD_OUT_SHARE of the hash range. That is a seeded shuffle of each class
 * (order by the hash, cut at 25%) which never moves a prompt from one side to the other
 * as the corpus grows, so nothing tuned on an earlier training set has seen a held-out prompt.
 */
import { createHash, type Hash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
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

/** A training prompt said another way: `how` says which (`translation: Thai`, `terse`). */
export interface AugmentedPrompt extends LabelledPrompt {
  source: string;
  how: string;
}

export interface Corpus {
  prompts: LabelledPrompt[];
  /** Copies of training prompts said another way, for training only. */
  augmented: AugmentedPrompt[];
  /** SHA-256 over the class files in class order, then augmented.jsonl. */
  sha256: string;
}

export const AUGMENTED_FILE = 'augmented.jsonl';

const lineSchema = z.object({
  id: z.string().min(1),
  label: z.enum(CLASSES),
  messages: z.array(z.object({ role: z.enum(['system', 'user', 'assistant']), content: z.string() })).min(1),
});
const augmentedSchema = lineSchema.extend({ source: z.string().min(1), how: z.string().min(1) });

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
    for (const { where, value } of jsonLines(file, text)) {
      const prompt = parse(lineSchema, value, where);
      if (prompt.label !== cls) throw new CorpusError(`${where}: label ${prompt.label} in the ${cls} file`);
      if (ids.has(prompt.id)) throw new CorpusError(`${where}: duplicate id ${prompt.id}`);
      ids.add(prompt.id);
      prompts.push({ id: prompt.id, label: prompt.label, messages: prompt.messages });
    }
  }
  const augmented = readAugmented(new URL(AUGMENTED_FILE, dir), prompts, ids, hash);
  return { prompts, augmented, sha256: hash.digest('hex') };
}

/** augmented.jsonl, if there is one: each line a copy of a training prompt, with its label. */
function readAugmented(file: URL, prompts: readonly LabelledPrompt[], ids: Set<string>, hash: Hash): AugmentedPrompt[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  hash.update(`${AUGMENTED_FILE}\n`).update(text);
  const byId = new Map(prompts.map((p) => [p.id, p]));
  const augmented: AugmentedPrompt[] = [];
  for (const { where, value } of jsonLines(file, text)) {
    const prompt = parse(augmentedSchema, value, where);
    if (ids.has(prompt.id)) throw new CorpusError(`${where}: duplicate id ${prompt.id}`);
    ids.add(prompt.id);
    const source = byId.get(prompt.source);
    if (!source) throw new CorpusError(`${where}: source ${prompt.source} is not a corpus prompt`);
    if (isHeldOut(source.id)) throw new CorpusError(`${where}: source ${prompt.source} is held out; only training prompts may be copied`);
    if (source.label !== prompt.label) throw new CorpusError(`${where}: label ${prompt.label}, but its source ${prompt.source} is ${source.label}`);
    augmented.push({ id: prompt.id, source: prompt.source, how: prompt.how, label: prompt.label, messages: prompt.messages });
  }
  return augmented;
}

function* jsonLines(file: URL, text: string): Generator<{ where: string; value: unknown }> {
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n] ?? '';
    if (line.trim() === '') continue;
    const where = `${file.pathname}:${n + 1}`;
    try {
      yield { where, value: JSON.parse(line) as unknown };
    } catch (err) {
      throw new CorpusError(`${where}: not JSON (${(err as Error).message})`);
    }
  }
}

function parse<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    const first = result.error.issues[0];
    throw new CorpusError(`${where}: ${first ? `${first.path.join('.') || '(line)'}: ${first.message}` : 'invalid'}`);
  }
  return result.data;
}

/** Where the split puts a prompt: its seeded hash as a share of the hash range. */
function splitKey(id: string): number {
  return createHash('sha256').update(`${SPLIT_SEED}:${id}`).digest().readUInt32BE(0) / 2 ** 32;
}

/** The split's one rule: a prompt is held out when its seeded hash falls in the lowest HELD_OUT_SHARE. */
export function isHeldOut(id: string): boolean {
  return splitKey(id) < HELD_OUT_SHARE;
}

/** Training and held-out sets, each in id order. */
export function split(prompts: readonly LabelledPrompt[]): { training: LabelledPrompt[]; heldOut: LabelledPrompt[] } {
  const sorted = [...prompts].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return {
    training: sorted.filter((p) => !isHeldOut(p.id)),
    heldOut: sorted.filter((p) => isHeldOut(p.id)),
  };
}
