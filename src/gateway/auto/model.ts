/**
 * svc-auto's weights file (`data/auto/model.json`): what the training script writes and
 * the gateway loads once at boot. Weights are int16, one scale per class, stored as
 * base64 (little-endian), so the file stays a few hundred KB.
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
export const MODEL_VERSION = 1;
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
  corpus: z.object({ sha256: z.string(), prompts: z.number().int(), training: z.number().int(), heldOut: z.number().int() }),
  training: z.object({
    seed: z.number().int(), epochs: z.number().int(), learningRate: z.number(), l2: z.number(), folds: z.number().int(),
  }),
  /** Top-two probabilities closer than this: the model is unsure (chosen by cross-validation on training data). */
  margin: z.number().min(0).max(1),
  crossValidation: evaluationSchema,
  heldOut: evaluationSchema,
  scales: z.array(z.number().positive()).length(CLASSES.length),
  weights: z.string(),
});
export type ModelFile = z.infer<typeof modelFileSchema>;

/** A loaded model: weights[f * CLASSES.length + c]. */
export interface AutoModel {
  file: ModelFile;
  weights: Float64Array;
  margin: number;
}

export class AutoModelError extends Error {
  override name = 'AutoModelError';
}

/** int16 per weight, scale per class; what the file stores. */
export function quantize(weights: Float64Array): { scales: number[]; data: string } {
  const bytes = Buffer.alloc(weights.length * 2);
  const scales = CLASSES.map((_c, c) => {
    let max = 0;
    for (let f = 0; f < DIMENSIONS; f++) max = Math.max(max, Math.abs(weights[f * CLASSES.length + c] ?? 0));
    const scale = Number(((max || 1) / 32_767).toPrecision(8));
    for (let f = 0; f < DIMENSIONS; f++) {
      const q = Math.max(-32_767, Math.min(32_767, Math.round((weights[f * CLASSES.length + c] ?? 0) / scale)));
      bytes.writeInt16LE(q, (f * CLASSES.length + c) * 2);
    }
    return scale;
  });
  return { scales, data: bytes.toString('base64') };
}

export function dequantize(scales: readonly number[], data: string): Float64Array {
  const bytes = Buffer.from(data, 'base64');
  if (bytes.length !== CLASSES.length * DIMENSIONS * 2) {
    throw new AutoModelError(`weights hold ${bytes.length} bytes, expected ${CLASSES.length * DIMENSIONS * 2}`);
  }
  const weights = new Float64Array(CLASSES.length * DIMENSIONS);
  for (let i = 0; i < weights.length; i++) weights[i] = bytes.readInt16LE(i * 2) * (scales[i % CLASSES.length] ?? 0);
  return weights;
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
  return { file, weights: dequantize(file.scales, file.weights), margin: file.margin };
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
