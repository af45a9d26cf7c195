/**
 * Trains svc-auto's model, deterministically: the same corpus gives the same bytes.
 *
 * Multinomial logistic regression, per-example SGD with AdaGrad steps and L2 on the
 * weights each step touches; a fixed seed orders the examples of each epoch (no
 * Math.random, no clock). Then only the `keep` features with the largest weights stay
 * (and every structural one): most hashed buckets carry noise, and the file stays small.
 * The corpus's augmented prompts (translations of training prompts) train beside their
 * sources; cross-validation keeps each in its source's fold.
 * The hyper-parameters and the unsure margin were chosen by k-fold cross-validation on
 * the training set only (cross-validation prunes each fold's model as the shipped one
 * is pruned); the held-out set is only scored.
 */
import { BUCKETS, DIMENSIONS, extractFeatures } from './features.js';
import { probabilitiesOf, topTwo } from './classifier.js';
import { split, type AugmentedPrompt, type Corpus, type LabelledPrompt } from './corpus.js';
import {
  CLASSES, dequantize, featureConfig, MODEL_FORMAT, MODEL_VERSION, quantize, serializeModel, type Evaluation, type ModelFile,
} from './model.js';

export interface TrainingParams {
  seed: number;
  epochs: number;
  learningRate: number;
  l2: number;
  folds: number;
  /** Features kept after fitting, by their largest weight in any class. */
  keep: number;
}

export const TRAINING: TrainingParams = { seed: 20_261_124, epochs: 10, learningRate: 0.1, l2: 3e-4, folds: 5, keep: 250_000 };
/** Candidate unsure margins, each the top of a band of width BAND. */
const BAND = 0.1;
const MARGINS = [0.1, 0.2, 0.3, 0.4, 0.5];
const BAND_ACCURACY = 2 / 3;

export interface Example {
  index: Int32Array;
  value: Float64Array;
  label: number;
}

/** A prompt's features with repeated indices summed, in index order. */
export function toExample(prompt: LabelledPrompt): Example {
  const vector = extractFeatures(prompt.messages);
  const order = Array.from({ length: vector.length }, (_v, i) => i);
  order.sort((a, b) => (vector.index[a] ?? 0) - (vector.index[b] ?? 0) || a - b);
  const index: number[] = [];
  const value: number[] = [];
  for (const i of order) {
    const f = vector.index[i] ?? 0;
    if (index.at(-1) === f) value[value.length - 1] = (value.at(-1) ?? 0) + (vector.value[i] ?? 0);
    else { index.push(f); value.push(vector.value[i] ?? 0); }
  }
  return { index: Int32Array.from(index), value: Float64Array.from(value), label: CLASSES.indexOf(prompt.label) };
}

/** mulberry32: a small seeded PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function shuffled(n: number, random: () => number): number[] {
  const order = Array.from({ length: n }, (_v, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j] ?? 0, order[i] ?? 0];
  }
  return order;
}

function scores(weights: Float64Array, example: Example): Float64Array {
  const p = new Float64Array(CLASSES.length);
  for (let k = 0; k < example.index.length; k++) {
    const f = example.index[k] ?? 0;
    const v = example.value[k] ?? 0;
    for (let c = 0; c < CLASSES.length; c++) p[c] = (p[c] ?? 0) + v * (weights[f * CLASSES.length + c] ?? 0);
  }
  const max = Math.max(...p);
  let sum = 0;
  for (let c = 0; c < p.length; c++) { p[c] = Math.exp((p[c] ?? 0) - max); sum += p[c] ?? 0; }
  for (let c = 0; c < p.length; c++) p[c] = (p[c] ?? 0) / sum;
  return p;
}

/** The weights, weights[f * CLASSES.length + c]. */
export function fit(examples: readonly Example[], params: TrainingParams): Float64Array {
  const weights = new Float64Array(CLASSES.length * DIMENSIONS);
  const squares = new Float64Array(CLASSES.length * DIMENSIONS);
  const random = prng(params.seed);
  for (let epoch = 0; epoch < params.epochs; epoch++) {
    for (const e of shuffled(examples.length, random)) {
      const example = examples[e];
      if (!example) continue;
      const p = scores(weights, example);
      for (let k = 0; k < example.index.length; k++) {
        const f = example.index[k] ?? 0;
        const v = example.value[k] ?? 0;
        for (let c = 0; c < CLASSES.length; c++) {
          const w = f * CLASSES.length + c;
          const g = ((p[c] ?? 0) - (c === example.label ? 1 : 0)) * v + params.l2 * (weights[w] ?? 0);
          squares[w] = (squares[w] ?? 0) + g * g;
          weights[w] = (weights[w] ?? 0) - (params.learningRate * g) / (Math.sqrt(squares[w] ?? 0) + 1e-8);
        }
      }
    }
  }
  return weights;
}

/**
 * The features a model keeps, ascending: every structural one, and the `keep` hashed
 * buckets whose largest weight (in absolute value, over the classes) is largest; ties by index.
 */
export function strongest(weights: Float64Array, keep: number): number[] {
  const strength = (f: number) => {
    let max = 0;
    for (let c = 0; c < CLASSES.length; c++) max = Math.max(max, Math.abs(weights[f * CLASSES.length + c] ?? 0));
    return max;
  };
  const buckets: Array<[number, number]> = [];
  for (let f = 0; f < BUCKETS; f++) {
    const s = strength(f);
    if (s > 0) buckets.push([f, s]);
  }
  buckets.sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  const kept = buckets.slice(0, keep).map(([f]) => f);
  for (let f = BUCKETS; f < DIMENSIONS; f++) kept.push(f);
  return kept.sort((a, b) => a - b);
}

/** `weights` with every feature but `kept` at zero. */
function only(weights: Float64Array, kept: readonly number[]): Float64Array {
  const out = new Float64Array(weights.length);
  for (const f of kept) for (let c = 0; c < CLASSES.length; c++) out[f * CLASSES.length + c] = weights[f * CLASSES.length + c] ?? 0;
  return out;
}

/** Accuracy, recall per class and confusion[actual][predicted]. */
export function evaluate(labels: readonly number[], predicted: readonly number[]): Evaluation {
  const confusion = CLASSES.map(() => CLASSES.map(() => 0));
  labels.forEach((label, i) => {
    const row = confusion[label];
    const p = predicted[i] ?? 0;
    if (row) row[p] = (row[p] ?? 0) + 1;
  });
  const correct = confusion.reduce((sum, row, c) => sum + (row[c] ?? 0), 0);
  const perClass: Record<string, number> = {};
  CLASSES.forEach((cls, c) => {
    const row = confusion[c] ?? [];
    const total = row.reduce((a, b) => a + b, 0);
    perClass[cls] = round4(total === 0 ? 0 : (row[c] ?? 0) / total);
  });
  return { prompts: labels.length, accuracy: round4(labels.length === 0 ? 0 : correct / labels.length), perClass, confusion };
}

function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

/** Extra training examples, each a copy of examples[source] said another way. */
export interface Copies {
  examples: readonly Example[];
  source: readonly number[];
}

/**
 * Out-of-fold probabilities over the training set (k-fold, folds by a seeded shuffle).
 * A copy trains only in the folds that train its source: a fold is never scored on a
 * prompt whose translation the model was trained on.
 */
export function crossValidate(examples: readonly Example[], params: TrainingParams, copies: Copies = NO_COPIES): Float64Array[] {
  const order = shuffled(examples.length, prng(params.seed ^ 0x5f3759df));
  const fold = new Int32Array(examples.length);
  order.forEach((e, i) => { fold[e] = i % params.folds; });
  const out: Float64Array[] = examples.map(() => new Float64Array(CLASSES.length));
  for (let k = 0; k < params.folds; k++) {
    const fitting = [
      ...examples.filter((_e, i) => fold[i] !== k),
      ...copies.examples.filter((_e, i) => fold[copies.source[i] ?? 0] !== k),
    ];
    const fitted = fit(fitting, params);
    const weights = only(fitted, strongest(fitted, params.keep));
    examples.forEach((example, i) => { if (fold[i] === k) out[i] = scores(weights, example); });
  }
  return out;
}

const NO_COPIES: Copies = { examples: [], source: [] };

/**
 * The unsure margin: the top of the highest band of top-two gaps, [margin − BAND, margin),
 * in which out-of-fold predictions on the training set are right less than BAND_ACCURACY
 * of the time: there the model's first choice is not much better than its second.
 */
export function chooseMargin(probabilities: readonly Float64Array[], labels: readonly number[]): number {
  let chosen = MARGINS[0] ?? BAND;
  for (const margin of MARGINS) {
    let inBand = 0;
    let right = 0;
    probabilities.forEach((p, i) => {
      const [best, second] = topTwo(p);
      const gap = (p[best] ?? 0) - (p[second] ?? 0);
      if (gap < margin - BAND || gap >= margin) return;
      inBand++;
      if (best === labels[i]) right++;
    });
    if (inBand > 0 && right / inBand < BAND_ACCURACY) chosen = margin;
  }
  return chosen;
}

export interface TrainingResult {
  file: ModelFile;
  /** The model file's exact text. */
  text: string;
  /** Held-out prompts and what the shipped (quantized) weights predict for them. */
  heldOut: Array<{ prompt: LabelledPrompt; probabilities: Float64Array }>;
  /** Training prompts that cross-validation got wrong, with their out-of-fold probabilities. */
  crossValidationMistakes: Array<{ prompt: LabelledPrompt; probabilities: Float64Array }>;
}

/** The augmented prompts as examples, each with its source's position in `training`. */
export function copiesOf(augmented: readonly AugmentedPrompt[], training: readonly LabelledPrompt[]): Copies {
  const position = new Map(training.map((p, i) => [p.id, i]));
  const source = augmented.map((a) => {
    const at = position.get(a.source);
    if (at === undefined) throw new Error(`augmented prompt ${a.id}: its source ${a.source} is not a training prompt`);
    return at;
  });
  return { examples: augmented.map(toExample), source };
}

export function train(corpus: Corpus, params: TrainingParams = TRAINING): TrainingResult {
  const { training, heldOut } = split(corpus.prompts);
  const examples = training.map(toExample);
  const labels = examples.map((e) => e.label);
  const copies = copiesOf(corpus.augmented, training);
  const oof = crossValidate(examples, params, copies);
  const margin = chooseMargin(oof, labels);
  const crossValidation = evaluate(labels, oof.map((p) => topTwo(p)[0]));
  const weights = fit([...examples, ...copies.examples], params);
  const { scales, kept, data } = quantize(weights, strongest(weights, params.keep));
  // Scored with the weights as shipped, through the serving path's extractor.
  const shipped = dequantize(scales, kept, data);
  const scored = heldOut.map((prompt) => ({ prompt, probabilities: probabilitiesOf(shipped, extractFeatures(prompt.messages)) }));
  const file: ModelFile = {
    format: MODEL_FORMAT,
    version: MODEL_VERSION,
    classes: [...CLASSES],
    features: featureConfig(),
    corpus: {
      sha256: corpus.sha256, prompts: corpus.prompts.length, training: training.length, heldOut: heldOut.length, augmented: copies.examples.length,
    },
    training: { ...params },
    margin,
    crossValidation,
    heldOut: evaluate(scored.map((s) => CLASSES.indexOf(s.prompt.label)), scored.map((s) => topTwo(s.probabilities)[0])),
    scales,
    kept,
    weights: data,
  };
  const crossValidationMistakes = training
    .map((prompt, i) => ({ prompt, probabilities: oof[i] ?? new Float64Array(CLASSES.length) }))
    .filter(({ probabilities }, i) => topTwo(probabilities)[0] !== labels[i]);
  return { file, text: serializeModel(file), heldOut: scored, crossValidationMistakes };
}
