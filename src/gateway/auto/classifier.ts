/**
 * svc-auto's classifier: multinomial logistic regression over the features of
 * features.ts, with weights trained by `npm run train:auto` (scripts/train-auto.ts) and
 * loaded once from data/auto/model.json.
 *
 * It returns the class, the three probabilities, and reasons: the features of this
 * prompt that pushed most towards the chosen class (`word "dockerfile"`, `code fence`,
 * `question count 3`). When the top two probabilities are closer than the model's margin
 * (chosen on training data), `when_unsure` decides: `capable` takes the more capable of
 * the two, `cheap` the cheaper, in the catalog's price order simple < code < complex.
 */
import type { ChatMessage } from '../../providers/types.js';
import { DIMENSIONS, extractFeatures, FeatureVector, Source, STRUCTURAL, type TextStats } from './features.js';
import { CLASSES, loadAutoModel, type AutoModel, type PromptClass } from './model.js';

export type WhenUnsure = 'capable' | 'cheap';
export type Probabilities = Record<PromptClass, number>;

export interface Classification {
  class: PromptClass;
  probabilities: Probabilities;
  /** The model's own choice, before `when_unsure`. */
  predicted: PromptClass;
  /** The second likeliest class: `when_unsure` chooses between it and `predicted`. */
  runnerUp: PromptClass;
  unsure: boolean;
  reasons: string[];
}

const REASONS = 3;
const WORD_SHOWN = 32;

/** Softmax of the class scores of one feature vector. */
export function probabilitiesOf(weights: Float64Array, vector: FeatureVector): Float64Array {
  const logits = new Float64Array(CLASSES.length);
  for (let i = 0; i < vector.length; i++) {
    const f = vector.index[i] ?? 0;
    const v = vector.value[i] ?? 0;
    for (let c = 0; c < CLASSES.length; c++) logits[c] = (logits[c] ?? 0) + v * (weights[c * DIMENSIONS + f] ?? 0);
  }
  let max = -Infinity;
  for (const l of logits) max = Math.max(max, l);
  let sum = 0;
  for (let c = 0; c < logits.length; c++) {
    logits[c] = Math.exp((logits[c] ?? 0) - max);
    sum += logits[c] ?? 0;
  }
  for (let c = 0; c < logits.length; c++) logits[c] = (logits[c] ?? 0) / sum;
  return logits;
}

/** Indices of the best and second-best class. */
export function topTwo(p: Float64Array): [number, number] {
  let best = 0;
  for (let c = 1; c < p.length; c++) if ((p[c] ?? 0) > (p[best] ?? 0)) best = c;
  let second = best === 0 ? 1 : 0;
  for (let c = 0; c < p.length; c++) if (c !== best && (p[c] ?? 0) > (p[second] ?? 0)) second = c;
  return [best, second];
}

export class PromptClassifier {
  constructor(readonly model: AutoModel) {}

  classify(messages: readonly ChatMessage[], whenUnsure: WhenUnsure = 'capable'): Classification {
    const vector = extractFeatures(messages);
    const p = probabilitiesOf(this.model.weights, vector);
    const [best, second] = topTwo(p);
    const gap = (p[best] ?? 0) - (p[second] ?? 0);
    const unsure = gap < this.model.margin;
    // CLASSES is in price order: a higher index is the more capable (and dearer) alias.
    const chosen = unsure ? (whenUnsure === 'capable' ? Math.max(best, second) : Math.min(best, second)) : best;
    const probabilities = { simple: round(p[0]), code: round(p[1]), complex: round(p[2]) };
    const reasons = this.reasons(vector, chosen);
    if (unsure) {
      const [a, b] = [CLASSES[best] ?? 'simple', CLASSES[second] ?? 'simple'];
      reasons.push(`unsure: ${a} ${percent(p[best])} vs ${b} ${percent(p[second])}, when_unsure ${whenUnsure} → ${CLASSES[chosen]}`);
    }
    return {
      class: CLASSES[chosen] ?? 'simple', probabilities, predicted: CLASSES[best] ?? 'simple', runnerUp: CLASSES[second] ?? 'simple',
      unsure, reasons,
    };
  }

  /** The features that pushed most towards `chosen` over the average class, grouped by what they came from. */
  private reasons(vector: FeatureVector, chosen: number): string[] {
    const weights = this.model.weights;
    const groups = new Map<number, { score: number; entry: number }>();
    for (let i = 0; i < vector.length; i++) {
      const f = vector.index[i] ?? 0;
      let mean = 0;
      for (let c = 0; c < CLASSES.length; c++) mean += weights[c * DIMENSIONS + f] ?? 0;
      mean /= CLASSES.length;
      const score = (vector.value[i] ?? 0) * ((weights[chosen * DIMENSIONS + f] ?? 0) - mean);
      const key = groupKey(vector, i);
      const group = groups.get(key);
      if (group) group.score += score;
      else groups.set(key, { score, entry: i });
    }
    const top = [...groups.values()]
      .filter((g) => g.score > 0 && describe(vector, g.entry) !== null)
      .sort((a, b) => b.score - a.score || a.entry - b.entry)
      .slice(0, REASONS);
    const reasons = top.map((g) => describe(vector, g.entry) ?? '');
    return reasons.length > 0 ? reasons : [`no strong cue: most likely ${CLASSES[chosen]}`];
  }
}

/** Word and char-grams of one word share a key; bigrams by bucket; structural by position. */
function groupKey(vector: FeatureVector, i: number): number {
  const source = vector.source[i] ?? 0;
  const ref = vector.ref[i] ?? 0;
  if (source === Source.Structural) return Source.Structural * 2 ** 32 + ref;
  if (source === Source.Bigram) return Source.Bigram * 2 ** 32 + (vector.index[i] ?? 0);
  const kind = source === Source.CharGram ? Source.Word : source;
  return kind * 2 ** 32 + ((vector.tokenHash[ref] ?? 0) >>> 0);
}

function describe(vector: FeatureVector, i: number): string | null {
  const ref = vector.ref[i] ?? 0;
  switch (vector.source[i]) {
    case Source.Word:
    case Source.CharGram:
      return `word "${shown(vector.token(ref))}"`;
    case Source.Symbol:
      return `symbol "${vector.token(ref)}"`;
    case Source.Bigram:
      return `words "${shown(vector.token(ref))} ${shown(vector.token(ref + 1))}"`;
    case Source.Context:
      return `earlier turn: word "${shown(vector.token(ref))}"`;
    case Source.Structural:
      return describeStructural(STRUCTURAL[ref] ?? 'bias', vector.stats);
    default:
      return null;
  }
}

function describeStructural(name: (typeof STRUCTURAL)[number], s: TextStats): string | null {
  const share = (n: number): string => `${Math.round((100 * n) / Math.max(1, s.chars))}%`;
  switch (name) {
    case 'bias': return null;
    case 'length': return `length ${s.fullChars.toLocaleString('en-US')} chars`;
    case 'tiny':
    case 'short': return `short prompt (${s.fullChars} chars)`;
    case 'medium': return `medium prompt (${s.fullChars.toLocaleString('en-US')} chars)`;
    case 'long': return `long prompt (${s.fullChars.toLocaleString('en-US')} chars)`;
    case 'lines': return `${s.lines} lines`;
    case 'fence': return 'code fence';
    case 'digits': return `digits ${share(s.digits)}`;
    case 'code-symbols': return `code symbols {}();<> ${share(s.codeSymbols)}`;
    case 'math-symbols': return `math symbols +-*/^= ${share(s.mathSymbols)}`;
    case 'questions': return `question count ${s.questions}`;
    case 'non-ascii': return `non-ASCII text ${share(s.nonAscii)}`;
    case 'indented-lines': return `${s.indentedLines} indented lines`;
    case 'code-line-ends': return `${s.codeLineEnds} lines ending in ; { } )`;
    case 'identifiers': return `${s.identifiers} camelCase/snake_case names`;
    case 'backslashes': return `${s.backslashes} backslashes`;
    case 'system': return 'system prompt';
    case 'turns': return `${s.userTurns} user turns`;
  }
}

function shown(token: string): string {
  return token.length > WORD_SHOWN ? `${token.slice(0, WORD_SHOWN)}…` : token;
}

function round(p: number | undefined): number {
  return Math.round((p ?? 0) * 1000) / 1000;
}

function percent(p: number | undefined): string {
  return (p ?? 0).toFixed(2);
}

let shared: PromptClassifier | undefined;

/** The classifier over the shipped weights, loaded on first use (the gateway asks for it at boot). */
export function defaultClassifier(): PromptClassifier {
  shared ??= new PromptClassifier(loadAutoModel());
  return shared;
}

/** Classifies with the shipped weights. */
export function classifyPrompt(messages: readonly ChatMessage[], whenUnsure: WhenUnsure = 'capable'): Classification {
  return defaultClassifier().classify(messages, whenUnsure);
}
