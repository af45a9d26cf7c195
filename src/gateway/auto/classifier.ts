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
import { extractFeatures, FeatureVector, Source, STRUCTURAL, type TextStats } from './features.js';
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
export function probabilitiesOf(weights: Float32Array, vector: FeatureVector): Float64Array {
  let simple = 0;
  let code = 0;
  let complex = 0;
  const { index, value } = vector;
  for (let i = 0; i < vector.length; i++) {
    const at = (index[i] ?? 0) * 3;
    const v = value[i] ?? 0;
    simple += v * (weights[at] ?? 0);
    code += v * (weights[at + 1] ?? 0);
    complex += v * (weights[at + 2] ?? 0);
  }
  const max = Math.max(simple, code, complex);
  const p = Float64Array.of(Math.exp(simple - max), Math.exp(code - max), Math.exp(complex - max));
  const sum = (p[0] ?? 0) + (p[1] ?? 0) + (p[2] ?? 0);
  for (let c = 0; c < 3; c++) p[c] = (p[c] ?? 0) / sum;
  return p;
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

  /**
   * The features that pushed most towards `chosen` over the average class: a word with its
   * character n-grams and every occurrence of it together, a bigram, a structural feature.
   */
  private reasons(vector: FeatureVector, chosen: number): string[] {
    const weights = this.model.weights;
    const tokens = vector.tokenHash.length;
    const tokenScore = new Float64Array(tokens);
    const bigramScore = new Float64Array(tokens);
    const structuralScore = new Float64Array(STRUCTURAL.length);
    for (let i = 0; i < vector.length; i++) {
      const at = (vector.index[i] ?? 0) * 3;
      const mean = ((weights[at] ?? 0) + (weights[at + 1] ?? 0) + (weights[at + 2] ?? 0)) / 3;
      const score = (vector.value[i] ?? 0) * ((weights[at + chosen] ?? 0) - mean);
      const ref = vector.ref[i] ?? 0;
      const source = vector.source[i];
      if (source === Source.Structural) structuralScore[ref] = (structuralScore[ref] ?? 0) + score;
      else if (source === Source.Bigram) bigramScore[ref] = (bigramScore[ref] ?? 0) + score;
      else tokenScore[ref] = (tokenScore[ref] ?? 0) + score;
    }
    // Every occurrence of a word counts towards it: merged by the token's hash (its namespace included).
    const words = new Map<number, { score: number; token: number }>();
    for (let t = 0; t < tokens; t++) {
      const score = tokenScore[t] ?? 0;
      if (score === 0) continue;
      const hash = vector.tokenHash[t] ?? 0;
      const word = words.get(hash);
      if (word) word.score += score;
      else words.set(hash, { score, token: t });
    }
    const top = new TopReasons(REASONS * 3);
    for (const { score, token } of words.values()) top.offer(score, tokenSource(vector, token), token);
    bigramScore.forEach((score, t) => top.offer(score, Source.Bigram, t));
    structuralScore.forEach((score, i) => { if (STRUCTURAL[i] !== 'bias') top.offer(score, Source.Structural, i); });
    const reasons = [...new Set(top.entries().map(([source, ref]) => describe(vector, source, ref)))].slice(0, REASONS);
    return reasons.length > 0 ? reasons : [`no strong cue: most likely ${CLASSES[chosen]}`];
  }
}

/** The `size` best positive scores offered, best first. */
class TopReasons {
  private readonly kept: Array<[score: number, source: Source, ref: number]> = [];

  constructor(private readonly size: number) {}

  offer(score: number, source: Source, ref: number): void {
    if (!(score > 0)) return;
    const kept = this.kept;
    if (kept.length === this.size && score <= (kept.at(-1)?.[0] ?? 0)) return;
    let at = kept.length;
    while (at > 0 && (kept[at - 1]?.[0] ?? 0) < score) at--;
    kept.splice(at, 0, [score, source, ref]);
    if (kept.length > this.size) kept.pop();
  }

  entries(): Array<[Source, number]> {
    return this.kept.map(([, source, ref]) => [source, ref]);
  }
}

/** A token of the last message is a word or a symbol; of another message, a context word. */
function tokenSource(vector: FeatureVector, token: number): Source {
  if ((vector.tokenText[token] ?? 0) !== 0) return Source.Context;
  const end = vector.tokenEnd[token] ?? 0;
  return end - (vector.tokenStart[token] ?? 0) === 1 && !isWordChar(vector.token(token).charCodeAt(0)) ? Source.Symbol : Source.Word;
}

function isWordChar(code: number): boolean {
  return (code >= 97 && code <= 122) || (code >= 48 && code <= 57) || code === 95 || code >= 128;
}

function describe(vector: FeatureVector, source: Source, ref: number): string {
  switch (source) {
    case Source.Symbol:
      return `symbol "${vector.token(ref)}"`;
    case Source.Bigram:
      return `words "${shown(vector.token(ref))} ${shown(vector.token(ref + 1))}"`;
    case Source.Context:
      return `earlier turn: word "${shown(vector.token(ref))}"`;
    case Source.Structural:
      return describeStructural(STRUCTURAL[ref] ?? 'length', vector.stats);
    default:
      return `word "${shown(vector.token(ref))}"`;
  }
}

function describeStructural(name: (typeof STRUCTURAL)[number], s: TextStats): string {
  const share = (n: number): string => `${Math.round((100 * n) / Math.max(1, s.chars))}%`;
  switch (name) {
    case 'bias':
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
