/**
 * svc-auto's weights file (`data/auto/model.json`): what the training script writes and
 * the gateway loads once at boot. Only the features training kept are stored (a bitmap
 * over all features), each with its weights relative to the first class's as int8 (see
 * STORED_CLASSES), one scale per stored class, both base64, so the file stays a few hundred
 * KB. Loaded, the weights are dense (float32) for lookup.
 */
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import {
  BUCKETS, CONTEXT_MESSAGE_CHARS, CONTEXT_MESSAGES, CONTEXT_TOTAL_CHARS, DIMENSIONS, EDGE_WORDS, GRAM_MAX, GRAM_MIN,
  HASH_BITS, LAST_HEAD_CHARS, LAST_TAIL_CHARS, STRUCTURAL, WEIGHTS,
} from './features.js';

export const CLASSES = ['simple', 'code', 'complex'] as const;
export type PromptClass = (typeof CLASSES)[number];
export const MODEL_FORMAT = 'svc-auto/logistic-regression';
export const MODEL_VERSION = 4;
export const DEFAULT_MODEL_URL = new URL('../../../data/auto/model.json', import.meta.url);

/** The extractor's settings, stored in the file: a model trained on other features is refused. */
export function featureConfig(): FeatureConfig {
  return {
    hashBits: HASH_BITS, charGrams: [GRAM_MIN, GRAM_MAX], edgeWords: EDGE_WORDS, weights: { ...WEIGHTS }, lastHeadChars: LAST_HEAD_CHARS, lastTailChars: LAST_TAIL_CHARS,
    contextMessageChars: CONTEXT_MESSAGE_CHARS, contextTotalChars: CONTEXT_TOTAL_CHARS, contextMessages: CONTEXT_MESSAGES,
    structural: [...STRUCTURAL],
  };
}

const featureConfigSchema = z.object({
  hashBits: z.number().int(),
  charGrams: z.tuple([z.number().int(), z.number().int()]),
  edgeWords: z.number().int(),
  weights: z.object({ word: z.number(), gram: z.number(), edge: z.number(), context: z.number(), structural: z.number() }),
  lastHeadChars: z.number().int(),
  lastTailChars: z.number().int(),
  contextMessageChars: z.number().int(),
  contextTotalChars: z.number().int(),
  contextMessages: z.number().int(),
  structural: z.array(z.string()),
});
export type FeatureConfig = z.infer<typeof featureConfigSchema>;

const evaluationSchema = z.object({
  prompts: z.number().int(),
  accuracy: z.number(),
  /** Per class: the share of its prompts classified as it (recall). */
  perClass: z.record(z.string(), z.number()),
  /** confusion[actual][predicted], rows and columns in CLASSES order. */
  confusion: z.array(z.array(z.number().int())),
});
export type Evaluation = z.infer<typeof evaluationSchema>;

const modelFileSchema = z.object({
  format: z.literal(MODEL_FORMAT),
  version: z.literal(MODEL_VERSION),
  classes: z.tuple([z.literal('simple'), z.literal('code'), z.literal('complex')]),
  features: featureConfigSchema,
  corpus: z.object({
    sha256: z.string(), prompts: z.number().int(), training: z.number().int(), heldOut: z.number().int(),
    /** Augmented copies of training prompts that trained it too (not counted in `prompts`). */
    augmented: z.number().int(),
  }),
  training: z.object({
    seed: z.number().int(), epochs: z.number().int(), learningRate: z.number(), l2: z.number(), folds: z.number().int(),
    keep: z.number().int().positive(),
  }),
  /** Top-two probabilities closer than this: the model is unsure (chosen by cross-validation on training data). */
  margin: z.number().min(0).max(1),
  crossValidation: evaluationSchema,
  heldOut: evaluationSchema,
  /** One per stored class: CLASSES after the first. */
  scales: z.array(z.number().positive()).length(CLASSES.length - 1),
  /** The kept features: a bitmap over all of them, bit f in byte f >> 3 at 1 << (f & 7). */
  kept: z.string(),
  /** Their weights, STORED_CLASSES int8 per kept feature, in ascending feature order. */
  weights: z.string(),
});
export type ModelFile = z.infer<typeof modelFileSchema>;

/**
 * A loaded model: weights[f * CLASSES.length + c], relative to the first class's (which is
 * 0), zero for every feature not kept.
 */
export interface AutoModel {
  file: ModelFile;
  weights: Float32Array;
  margin: number;
}

export class AutoModelError extends Error {
  override name = 'AutoModelError';
}

/** The bytes of a bitmap over every feature: bit f (byte f >> 3, bit f & 7) is set when feature f is kept. */
const BITMAP_BYTES = Math.ceil(DIMENSIONS / 8);

/**
 * The classes whose weights the file stores: all but the first. Softmax is the same when
 * every class's weight of a feature moves by one amount, so each feature's weights are
 * stored minus the first class's, whose own is then always 0: the same probabilities (and
 * reasons, which compare each class with the average) from two numbers a feature, not three.
 */
const STORED_CLASSES = CLASSES.length - 1;

/** A feature's weight for class `c` (≥ 1) relative to the first class's. */
function relative(weights: Float64Array, f: number, c: number): number {
  return (weights[f * CLASSES.length + c] ?? 0) - (weights[f * CLASSES.length] ?? 0);
}

/**
 * What the file stores of `weights`: a bitmap of the `kept` features, then for each kept
 * feature in ascending order its relative weights as int8, with a scale per stored class.
 * int8 costs no accuracy here: cross-validation scored int8, int16 and float weights alike,
 * and these relative int8 weights pick the float weights' class for every training prompt.
 */
export function quantize(weights: Float64Array, kept: readonly number[]): { scales: number[]; kept: string; data: string } {
  const bitmap = Buffer.alloc(BITMAP_BYTES);
  for (const f of kept) bitmap[f >> 3] = (bitmap[f >> 3] ?? 0) | (1 << (f & 7));
  const order = [...kept].sort((a, b) => a - b);
  const bytes = Buffer.alloc(order.length * STORED_CLASSES);
  const scales = Array.from({ length: STORED_CLASSES }, (_v, s) => {
    let max = 0;
    for (const f of order) max = Math.max(max, Math.abs(relative(weights, f, s + 1)));
    const scale = Number(((max || 1) / 127).toPrecision(8));
    order.forEach((f, k) => {
      const q = Math.max(-127, Math.min(127, Math.round(relative(weights, f, s + 1) / scale)));
      bytes.writeInt8(q, k * STORED_CLASSES + s);
    });
    return scale;
  });
  return { scales, kept: bitmap.toString('base64'), data: bytes.toString('base64') };
}

/** The dense weights of a file's kept-feature bitmap and their int8 weights. */
export function dequantize(scales: readonly number[], kept: string, data: string): Float32Array {
  const bitmap = Buffer.from(kept, 'base64');
  const bytes = Buffer.from(data, 'base64');
  if (bitmap.length !== BITMAP_BYTES) throw new AutoModelError(`kept holds ${bitmap.length} bytes, not a bitmap of ${DIMENSIONS} features (${BITMAP_BYTES} bytes)`);
  const last = bitmap[BITMAP_BYTES - 1] ?? 0;
  if (DIMENSIONS % 8 !== 0 && last >> (DIMENSIONS % 8) !== 0) throw new AutoModelError(`kept marks features beyond the last one (${DIMENSIONS - 1})`);
  const count = bitsSet(bitmap);
  if (bytes.length !== count * STORED_CLASSES) {
    throw new AutoModelError(`weights hold ${bytes.length} bytes, expected ${count * STORED_CLASSES} for ${count} kept features`);
  }
  const weights = new Float32Array(CLASSES.length * DIMENSIONS);
  let k = 0;
  for (let f = 0; f < DIMENSIONS; f++) {
    if (((bitmap[f >> 3] ?? 0) & (1 << (f & 7))) === 0) continue;
    // The first class's weight stays 0: the stored ones are relative to it.
    for (let s = 0; s < STORED_CLASSES; s++) weights[f * CLASSES.length + s + 1] = bytes.readInt8(k * STORED_CLASSES + s) * (scales[s] ?? 0);
    k++;
  }
  return weights;
}

/** How many features a file's bitmap keeps. */
export function keptCount(kept: string): number {
  return bitsSet(Buffer.from(kept, 'base64'));
}

function bitsSet(bitmap: Buffer): number {
  let count = 0;
  for (const byte of bitmap) for (let b = byte; b !== 0; b &= b - 1) count++;
  return count;
}

/** Checks a parsed file against this build's feature extractor and decodes its weights. */
export function modelFromFile(source: unknown): AutoModel {
  const parsed = modelFileSchema.safeParse(source);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    throw new AutoModelError(`not an svc-auto model file (${first ? `${first.path.join('.') || '(root)'}: ${first.message}` : 'invalid'})`);
  }
  const file = parsed.data;
  if (!isDeepStrictEqual(file.features, featureConfig())) {
    throw new AutoModelError('it was trained with other features than this build extracts: run `npm run train:auto`');
  }
  if (BUCKETS + STRUCTURAL.length !== DIMENSIONS) throw new AutoModelError('inconsistent feature dimensions');
  return { file, weights: dequantize(file.scales, file.kept, file.weights), margin: file.margin };
}

/** Reads and checks the weights file; every failure is one AutoModelError naming the file. */
export function loadAutoModel(url: URL | string = DEFAULT_MODEL_URL): AutoModel {
  const path = typeof url === 'string' ? url : url.pathname;
  let text: string;
  try {
    text = readFileSync(url, 'utf8');
  } catch (err) {
    throw new AutoModelError(`svc-auto model ${path}: cannot read it (${(err as Error).message}); run \`npm run train:auto\``);
  }
  try {
    return modelFromFile(JSON.parse(text));
  } catch (err) {
    throw new AutoModelError(`svc-auto model ${path}: ${(err as Error).message}`);
  }
}

/** The file's text: stable key order, one field per line, weights last. */
export function serializeModel(file: ModelFile): string {
  return `${JSON.stringify(file, null, 1)}\n`;
}
