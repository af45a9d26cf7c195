/**
 * svc-auto's features: one extractor shared by the training script and the gateway, so
 * the model sees at serving time exactly what it saw in training.
 *
 * What it reads
 * - The last user message, most: hashed word unigrams (`w`), bigrams over words and
 *   symbols (`b`), symbols such as `{` or `=` (`p`), character 3–5-grams within words
 *   (`c`), its first and last EDGE_WORDS words again (`h`, `t`: where the ask usually
 *   is, before or after pasted material), and the structural features below. Digits all
 *   hash alike (numbers generalise); each Chinese or Japanese character is a word.
 * - Every other message (earlier turns, the system prompt, assistant turns): word
 *   unigrams only, in their own namespace (`x`) and at half weight.
 * Each namespace's values are 1/√count, so a long prompt does not outweigh a short one
 * by its length alone (length has its own features).
 *
 * What it costs: linear time, bounded whatever the prompt's size. The last user message
 * is read up to its first LAST_HEAD_CHARS and last LAST_TAIL_CHARS characters; the other
 * messages up to CONTEXT_MESSAGE_CHARS each, CONTEXT_TOTAL_CHARS and CONTEXT_MESSAGES
 * messages in all, from the last backwards. Every loop walks characters; no regular
 * expression runs on caller text. A 100,000-token prompt costs what an 8,000-character one does.
 */
import type { ChatMessage } from '../../providers/types.js';

export const HASH_BITS = 19;
export const BUCKETS = 1 << HASH_BITS;
export const LAST_HEAD_CHARS = 6_000;
export const LAST_TAIL_CHARS = 2_000;
export const CONTEXT_MESSAGE_CHARS = 1_500;
export const CONTEXT_TOTAL_CHARS = 4_500;
export const CONTEXT_MESSAGES = 16;
/** Each namespace's weight (its entries' values are weight/√count). */
export const WEIGHTS = { word: 1, gram: 0.5, edge: 1, context: 0.5, structural: 1 } as const;
/** How many words at each end of the last user message are the ask's edge words. */
export const EDGE_WORDS = 12;
export const GRAM_MIN = 3;
export const GRAM_MAX = 5;

/** The structural features, after the hashed buckets, in this order. */
export const STRUCTURAL = [
  'bias', 'length', 'tiny', 'short', 'medium', 'long', 'lines', 'fence', 'digits', 'code-symbols', 'math-symbols',
  'questions', 'non-ascii', 'indented-lines', 'code-line-ends', 'identifiers', 'backslashes', 'system', 'turns',
] as const;
export type StructuralName = (typeof STRUCTURAL)[number];
export const DIMENSIONS = BUCKETS + STRUCTURAL.length;

/** What each feature in a vector came from, for the reasons. */
export enum Source { Word, Bigram, Symbol, CharGram, Context, Structural }

/** Raw counts over the last user message's scanned window. */
export interface TextStats {
  chars: number;
  lines: number;
  fences: number;
  digits: number;
  codeSymbols: number;
  mathSymbols: number;
  questions: number;
  nonAscii: number;
  indentedLines: number;
  codeLineEnds: number;
  identifiers: number;
  words: number;
  backslashes: number;
  /** The whole message's length, beyond the window. */
  fullChars: number;
  systemPrompt: boolean;
  userTurns: number;
}

/**
 * A sparse vector with, for each entry, where it came from: a token (its text's index
 * and span) or a structural feature. Arrays grow as needed; `length` entries are used.
 */
export class FeatureVector {
  length = 0;
  index = new Int32Array(1024);
  value = new Float64Array(1024);
  source = new Uint8Array(1024);
  /** Word, context, char-gram, symbol: the token; bigram: its first token; structural: its position in STRUCTURAL. */
  ref = new Int32Array(1024);
  readonly texts: string[] = [];
  /** Token table: text, start, end, and the token's hash (a key for grouping). */
  tokenText: number[] = [];
  tokenStart: number[] = [];
  tokenEnd: number[] = [];
  tokenHash: number[] = [];
  stats: TextStats = emptyStats();

  add(index: number, value: number, source: Source, ref: number): void {
    if (this.length === this.index.length) this.grow();
    const i = this.length++;
    this.index[i] = index;
    this.value[i] = value;
    this.source[i] = source;
    this.ref[i] = ref;
  }

  token(i: number): string {
    return this.texts[this.tokenText[i] ?? 0]?.slice(this.tokenStart[i], this.tokenEnd[i]) ?? '';
  }

  /** Multiplies the values of entries from `from` on by `factor`. */
  scale(from: number, factor: number): void {
    for (let i = from; i < this.length; i++) this.value[i] = (this.value[i] ?? 0) * factor;
  }

  private grow(): void {
    const size = this.index.length * 2;
    const index = new Int32Array(size); index.set(this.index); this.index = index;
    const value = new Float64Array(size); value.set(this.value); this.value = value;
    const source = new Uint8Array(size); source.set(this.source); this.source = source;
    const ref = new Int32Array(size); ref.set(this.ref); this.ref = ref;
  }
}

function emptyStats(): TextStats {
  return {
    chars: 0, lines: 0, fences: 0, digits: 0, codeSymbols: 0, mathSymbols: 0, questions: 0, nonAscii: 0, indentedLines: 0,
    codeLineEnds: 0, identifiers: 0, words: 0, backslashes: 0, fullChars: 0, systemPrompt: false, userTurns: 0,
  };
}

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** One FNV-1a step over a UTF-16 code unit; digits all hash as `0` so numbers generalise. */
function mix(hash: number, code: number): number {
  return Math.imul(hash ^ (code >= 48 && code <= 57 ? 48 : code), FNV_PRIME);
}

const SPACE = 0;
const WORD = 1;
const SYMBOL = 2;
/** A Chinese or Japanese character: a word of its own (those scripts put no spaces between words). */
const CJK = 3;
type Kind = typeof SPACE | typeof WORD | typeof SYMBOL | typeof CJK;

/** Letters, digits, `_` and most non-ASCII (other scripts) make words; other ASCII marks are symbols. */
function kindOf(code: number): Kind {
  if (code <= 32) return SPACE;
  if (code < 128) {
    if ((code >= 97 && code <= 122) || (code >= 48 && code <= 57) || code === 95 || (code >= 65 && code <= 90)) return WORD;
    return code === 127 ? SPACE : SYMBOL;
  }
  if (code === 0xa0 || (code >= 0x2000 && code <= 0x200b) || code === 0x3000) return SPACE;
  if ((code >= 0x2010 && code <= 0x206f) || (code >= 0x3001 && code <= 0x303f) || (code >= 0xff01 && code <= 0xff0f)
    || (code >= 0xa1 && code <= 0xbf)) return SYMBOL;
  if ((code >= 0x3040 && code <= 0x30ff) || (code >= 0x3400 && code <= 0x4dbf) || (code >= 0x4e00 && code <= 0x9fff)
    || (code >= 0xf900 && code <= 0xfaff)) return CJK;
  return WORD;
}

/** The head and tail of a long text, joined by a newline. */
export function window(text: string, head: number, tail: number): string {
  if (text.length <= head + tail) return text;
  return `${text.slice(0, head)}\n${text.slice(text.length - tail)}`;
}

/** The features of a conversation, as the model reads them. */
export function extractFeatures(messages: readonly ChatMessage[]): FeatureVector {
  const vector = new FeatureVector();
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === 'user') { lastUser = i; break; }
  }
  const last = lastUser >= 0 ? messages[lastUser]?.content ?? '' : '';
  const text = window(last, LAST_HEAD_CHARS, LAST_TAIL_CHARS);
  vector.texts.push(text.toLowerCase());
  scanLastMessage(vector, text);
  vector.stats.fullChars = last.length;
  scanContext(vector, messages, lastUser);
  for (const message of messages) {
    if (message.role === 'user') vector.stats.userTurns++;
    else if (message.role === 'system') vector.stats.systemPrompt = true;
  }
  addStructural(vector);
  return vector;
}

/** Tokens, n-grams and counts of the last user message's window (`original` keeps its case). */
function scanLastMessage(vector: FeatureVector, original: string): void {
  const lower = vector.texts[0] ?? '';
  const wordsFrom = vector.length;
  let previous = -1;
  let i = 0;
  const n = lower.length;
  // Tokens: words and single symbols. Unigrams and bigrams as they come; grams after.
  while (i < n) {
    const kind = kindOf(lower.charCodeAt(i));
    if (kind === SPACE) { i++; continue; }
    let end = i + 1;
    if (kind === WORD) while (end < n && kindOf(lower.charCodeAt(end)) === WORD) end++;
    const word = kind !== SYMBOL;
    let hash = Math.imul(FNV_OFFSET ^ (word ? 119 : 112), FNV_PRIME);
    for (let j = i; j < end; j++) hash = mix(hash, lower.charCodeAt(j));
    const token = pushToken(vector, 0, i, end, hash);
    vector.add((hash >>> 0) & (BUCKETS - 1), 1, word ? Source.Word : Source.Symbol, token);
    if (previous >= 0) {
      let bigram = Math.imul((vector.tokenHash[previous] ?? 0) ^ 98, FNV_PRIME);
      for (let j = i; j < end; j++) bigram = mix(bigram, lower.charCodeAt(j));
      vector.add((bigram >>> 0) & (BUCKETS - 1), 1, Source.Bigram, previous);
    }
    previous = token;
    i = end;
  }
  normalise(vector, wordsFrom, WEIGHTS.word);
  const gramsFrom = vector.length;
  const tokens = vector.tokenStart.length;
  for (let t = 0; t < tokens; t++) {
    const start = vector.tokenStart[t] ?? 0;
    const end = vector.tokenEnd[t] ?? 0;
    if (kindOf(lower.charCodeAt(start)) !== SYMBOL) addCharGrams(vector, lower, start, end, t);
  }
  normalise(vector, gramsFrom, WEIGHTS.gram);
  addEdgeWords(vector, lower);
  countStats(vector.stats, original);
}

function pushToken(vector: FeatureVector, text: number, start: number, end: number, hash: number): number {
  vector.tokenText.push(text);
  vector.tokenStart.push(start);
  vector.tokenEnd.push(end);
  vector.tokenHash.push(hash);
  return vector.tokenHash.length - 1;
}

/** The first and last EDGE_WORDS words again, in their own namespace: where the ask usually is. */
function addEdgeWords(vector: FeatureVector, lower: string): void {
  const from = vector.length;
  const words: number[] = [];
  const tokens = vector.tokenStart.length;
  for (let t = 0; t < tokens; t++) if (kindOf(lower.charCodeAt(vector.tokenStart[t] ?? 0)) !== SYMBOL) words.push(t);
  const edge = (t: number, side: number): void => {
    const hash = Math.imul((vector.tokenHash[t] ?? 0) ^ side, FNV_PRIME);
    vector.add((hash >>> 0) & (BUCKETS - 1), 1, Source.Word, t);
  };
  for (let k = 0; k < Math.min(EDGE_WORDS, words.length); k++) edge(words[k] ?? 0, 104);
  for (let k = Math.max(0, words.length - EDGE_WORDS); k < words.length; k++) edge(words[k] ?? 0, 116);
  normalise(vector, from, WEIGHTS.edge);
}

/** Character n-grams of one word with `<` and `>` marking its edges. */
function addCharGrams(vector: FeatureVector, text: string, start: number, end: number, token: number): void {
  const length = end - start + 2;
  for (let size = GRAM_MIN; size <= GRAM_MAX; size++) {
    for (let from = 0; from + size <= length; from++) {
      let hash = Math.imul(FNV_OFFSET ^ (99 + size), FNV_PRIME);
      for (let k = from; k < from + size; k++) {
        const at = start + k - 1;
        hash = mix(hash, k === 0 ? 60 : at >= end ? 62 : text.charCodeAt(at));
      }
      vector.add((hash >>> 0) & (BUCKETS - 1), 1, Source.CharGram, token);
    }
  }
}

/** Scales the entries from `from` on to 1/√count (times `weight`). */
function normalise(vector: FeatureVector, from: number, weight = 1): void {
  const count = vector.length - from;
  if (count > 0) vector.scale(from, weight / Math.sqrt(count));
}

/** Word unigrams of the other messages, newest first, within the context budgets. */
function scanContext(vector: FeatureVector, messages: readonly ChatMessage[], lastUser: number): void {
  const from = vector.length;
  let budget = CONTEXT_TOTAL_CHARS;
  let seen = 0;
  for (let m = messages.length - 1; m >= 0 && budget > 0 && seen < CONTEXT_MESSAGES; m--) {
    if (m === lastUser) continue;
    seen++;
    const content = messages[m]?.content ?? '';
    const take = Math.min(content.length, CONTEXT_MESSAGE_CHARS, budget);
    budget -= take;
    const text = content.slice(0, take).toLowerCase();
    const textIndex = vector.texts.push(text) - 1;
    let i = 0;
    while (i < text.length) {
      const kind = kindOf(text.charCodeAt(i));
      if (kind === SPACE || kind === SYMBOL) { i++; continue; }
      let end = i + 1;
      if (kind === WORD) while (end < text.length && kindOf(text.charCodeAt(end)) === WORD) end++;
      let hash = Math.imul(FNV_OFFSET ^ 120, FNV_PRIME);
      for (let j = i; j < end; j++) hash = mix(hash, text.charCodeAt(j));
      const token = pushToken(vector, textIndex, i, end, hash);
      vector.add((hash >>> 0) & (BUCKETS - 1), 1, Source.Context, token);
      i = end;
    }
  }
  normalise(vector, from, WEIGHTS.context);
}

/** One pass over the window, counting what the structural features need. */
function countStats(stats: TextStats, text: string): void {
  const n = text.length;
  stats.chars = n;
  stats.lines = n > 0 ? 1 : 0;
  let lineStart = true;
  let lastVisible = 0;
  let inWord = false;
  let wordHasLower = false;
  let wordIdentifier = false;
  for (let i = 0; i < n; i++) {
    const code = text.charCodeAt(i);
    if (lineStart && (code === 9 || (code === 32 && text.charCodeAt(i + 1) === 32 && text.charCodeAt(i + 2) === 32 && text.charCodeAt(i + 3) === 32))) {
      stats.indentedLines++;
    }
    lineStart = false;
    if (code === 10) {
      stats.lines++;
      lineStart = true;
      if (lastVisible === 59 || lastVisible === 123 || lastVisible === 125 || lastVisible === 41) stats.codeLineEnds++;
      lastVisible = 0;
    } else if (code > 32) {
      lastVisible = code;
    }
    if (code >= 48 && code <= 57) stats.digits++;
    else if (code === 123 || code === 125 || code === 59 || code === 40 || code === 41 || code === 91 || code === 93 || code === 60 || code === 62) stats.codeSymbols++;
    else if (code === 43 || code === 45 || code === 42 || code === 47 || code === 94 || code === 61) stats.mathSymbols++;
    else if (code === 63 || code === 0xff1f) stats.questions++;
    else if (code === 92) stats.backslashes++;
    else if (code === 96 && text.charCodeAt(i + 1) === 96 && text.charCodeAt(i + 2) === 96) { stats.fences++; i += 2; continue; }
    if (code >= 128) stats.nonAscii++;
    const word = kindOf(code) === WORD || kindOf(code) === CJK;
    if (word && !inWord) { stats.words++; wordHasLower = false; wordIdentifier = false; }
    // snake_case or camelCase: an identifier, counted once per word.
    if (word && wordHasLower && !wordIdentifier && (code === 95 || (code >= 65 && code <= 90))) {
      wordIdentifier = true;
      stats.identifiers++;
    }
    if (code >= 97 && code <= 122) wordHasLower = true;
    inWord = word;
  }
  if (lastVisible === 59 || lastVisible === 123 || lastVisible === 125 || lastVisible === 41) stats.codeLineEnds++;
}

/** The structural features, each scaled to about 0–1. */
function addStructural(vector: FeatureVector): void {
  const s = vector.stats;
  const chars = Math.max(1, s.chars);
  const lines = Math.max(1, s.lines);
  const values: Record<StructuralName, number> = {
    'bias': 1,
    'length': Math.log1p(s.fullChars) / 10,
    'tiny': s.fullChars < 60 ? 1 : 0,
    'short': s.fullChars >= 60 && s.fullChars < 300 ? 1 : 0,
    'medium': s.fullChars >= 300 && s.fullChars < 1_500 ? 1 : 0,
    'long': s.fullChars >= 1_500 ? 1 : 0,
    'lines': Math.log1p(s.lines) / 6,
    'fence': s.fences > 0 ? 1 : 0,
    'digits': Math.min(1, (5 * s.digits) / chars),
    'code-symbols': Math.min(1, (10 * s.codeSymbols) / chars),
    'math-symbols': Math.min(1, (10 * s.mathSymbols) / chars),
    'questions': Math.min(5, s.questions) / 5,
    'non-ascii': s.nonAscii / chars,
    'indented-lines': s.indentedLines / lines,
    'code-line-ends': s.codeLineEnds / lines,
    'identifiers': Math.min(1, (4 * s.identifiers) / Math.max(1, s.words)),
    'backslashes': Math.min(1, (20 * s.backslashes) / chars),
    'system': s.systemPrompt ? 1 : 0,
    'turns': Math.log1p(Math.max(0, s.userTurns - 1)) / 3,
  };
  STRUCTURAL.forEach((name, i) => {
    const value = values[name];
    if (value !== 0) vector.add(BUCKETS + i, name === 'bias' ? 1 : value * WEIGHTS.structural, Source.Structural, i);
  });
}
