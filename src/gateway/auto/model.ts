/**
 * svc-auto's weights file (`data/auto/model.json`): what the training script writes and
 * the gateway loads once at boot. Only the features training kept are stored (their
 * indices as uint32, ascending), each with its three weights as int16, one scale per
 * class, all base64 (little-endian), so the file stays a few hundred KB however many
 * buckets the features hash into. Loaded, the weights are dense (float32) for lookup.
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
export const MODEL_VERSION = 2;
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
    keep: z.number().int().positive(),
  }),
  /** Top-two probabilities closer than this: the model is unsure (chosen by cross-validation on training data). */
  margin: z.number().min(0).max(1),
  crossValidation: evaluationSchema,
  heldOut: evaluationSchema,
  scales: z.array(z.number().positive()).length(CLASSES.length),
  /** The kept features' indices, uint32 ascending. */
  kept: z.string(),
  /** Their weights, CLASSES.length int16 per kept feature, in the order of `kept`. */
  weights: z.string(),
});
export type ModelFile = z.infer<typeof modelFileSchema>;

/** A loaded model: weights[f * CLASSES.length + c], zero for every feature not kept. */
export interface AutoModel {
  file: ModelFile;
  weights: Float32Array;
  margin: number;
}

export class AutoModelError extends Error {
  override name = 'AutoModelError';
}

/** What the file stores of `weights`: the `kept` features (ascending), int16 per weight, a scale per class. */
export function quantize(weights: Float64Array, kept: readonly number[]): { scales: number[]; kept: string; data: string } {
  const index = Buffer.alloc(kept.length * 4);
  kept.forEach((f, k) => index.writeUInt32LE(f, k * 4));
  const bytes = Buffer.alloc(kept.length * CLASSES.length * 2);
  const scales = CLASSES.map((_c, c) => {
    let max = 0;
    for (const f of kept) max = Math.max(max, Math.abs(weights[f * CLASSES.length + c] ?? 0));
    const scale = Number(((max || 1) / 32_767).toPrecision(8));
    kept.forEach((f, k) => {
      const q = Math.max(-32_767, Math.min(32_767, Math.round((weights[f * CLASSES.length + c] ?? 0) / scale)));
      bytes.writeInt16LE(q, (k * CLASSES.length + c) * 2);
    });
    return scale;
  });
  return { scales, kept: index.toString('base64'), data: bytes.toString('base64') };
}

/** The dense weights of a file's kept features and their int16 weights. */
export function dequantize(scales: readonly number[], kept: string, data: string): Float32Array {
  const index = Buffer.from(kept, 'base64');
  const bytes = Buffer.from(data, 'base64');
  if (index.length % 4 !== 0) throw new AutoModelError(`kept holds ${index.length} bytes, not whole uint32s`);
  const count = index.length / 4;
  if (bytes.length !== count * CLASSES.length * 2) {
    throw new AutoModelError(`weights hold ${bytes.length} bytes, expected ${count * CLASSES.length * 2} for ${count} kept features`);
  }
  const weights = new Float32Array(CLASSES.length * DIMENSIONS);
  let previous = -1;
  for (let k = 0; k < count; k++) {
    const f = index.readUInt32LE(k * 4);
    if (f <= previous || f >= DIMENSIONS) throw new AutoModelError(`kept feature ${k} is ${f}: not ascending within 0..${DIMENSIONS - 1}`);
    previous = f;
    for (let c = 0; c < CLASSES.length; c++) {
      weights[f * CLASSES.length + c] = bytes.readInt16LE((k * CLASSES.length + c) * 2) * (scales[c] ?? 0);
    }
  }
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
