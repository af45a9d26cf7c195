/**
 * The svc-auto prompt classifier: decides whether a request is `simple`, `code` or
 * `complex`, and says why. It only scans text with fixed regular expressions (no
 * tokenizer, no network), so it is cheap enough to run on every request.
 *
 * What it reads
 * - User messages, mainly: the last user message counts in full, earlier user messages
 *   count half, the system prompt a quarter. Assistant and tool messages are ignored.
 * - Length is estimated as characters / 4 over the user messages.
 * - Each message is scanned up to its first 48,000 and last 12,000 characters, and a
 *   conversation up to 200,000 characters in all: the last user message first, then the
 *   other messages from the last backwards. Older text beyond that is not scanned (it
 *   still counts toward the length).
 *
 * What it looks for (each cue adds points to one family, up to the cue's cap over the
 * whole conversation; repeated words count once)
 * - Code: fenced ``` blocks (3), stack traces (3), SQL statements (3), "write a
 *   function / script / program …" (3), code syntax such as `def f(`, `const x =`,
 *   `import … from`, `#include <` (1.5 each), error names like `TypeError` (2),
 *   developer words: refactor, debug, compile, regex, unit test, bug (1.5 each),
 *   "my code" (1.5), inline `code` (1 each), file names like `app.py` (1 each),
 *   language and framework names (1 each).
 * - Math: prove / proof / theorem (3), math words: integral, derivative, probability,
 *   solve for, matrix, eigenvalue, equation… (2 each), LaTeX such as `\frac`, `\int`,
 *   `$…$` (2 each), math symbols and expressions such as `3x + 7 = 22`, `x^2` (1 each).
 * - Multi-step: "step by step" (2), three or more numbered items (2), "first … then …"
 *   (1.5), three or more questions (0.75 each, up to 3), three or more bullets (1),
 *   planning words: plan, design, architecture, compare, contrast, trade-offs, analyze,
 *   strategy, recommend, in depth… (1 each).
 * - A plainly simple task (the last user message starts with translate, summarize,
 *   classify, paraphrase, proofread, complete…) halves that message's math and
 *   multi-step points: the text being summarized is not the question being asked.
 *
 * How it decides (in this order)
 * 1. code    — code points ≥ 3 and at least the math points. A debugging question stays
 *              `code` even when it is long or multi-step.
 * 2. complex — math ≥ 3, or multi-step ≥ 3, or the prompt is long (> 2,000 tokens est.),
 *              or all points together reach 4 (a prompt over 500 tokens adds 1 to that).
 * 3. simple  — everything else: greetings, short factual questions, translation,
 *              classification, summarizing a short text, autocomplete.
 *
 * What it costs: time linear in the text, by construction (the text is the caller's, read
 * before any credit check). Every repetition in a pattern is bounded (`\s{0,8}`, `\w{1,64}`,
 * a `{0,300}?` window), so a match attempt reads a few hundred characters at most; runs
 * that follow one another match different characters (`\w{1,64}\s{0,8}\(`), so no attempt
 * tries the splits of one run between two; a file name is tried only where a name starts.
 * A whole budget of worst-case text takes tens of milliseconds (classifier-worst-case.test.ts).
 */
import type { ChatMessage } from '../providers/types.js';

export type PromptClass = 'simple' | 'code' | 'complex';

export interface ClassificationSignals {
  /** Estimated tokens (characters / 4) over the user messages. */
  promptTokens: number;
  /** Estimated tokens over all messages, system and assistant included. */
  contextTokens: number;
  codeScore: number;
  mathScore: number;
  stepScore: number;
  fencedCodeBlocks: number;
  hasStackTrace: boolean;
  questionCount: number;
  numberedItems: number;
  simpleTask: boolean;
}

export interface Classification {
  class: PromptClass;
  reasons: string[];
  signals: ClassificationSignals;
}

type Family = 'code' | 'math' | 'steps';

interface Cue {
  id: string;
  family: Family;
  /** Must carry the `g` flag. */
  pattern: RegExp;
  /** Points per counted match. */
  points: number;
  /** Cap on this cue's points from one message. */
  max: number;
  /** Count distinct matched texts rather than every match. */
  distinct?: boolean;
  /** Fewer matches than this count as none. */
  minCount?: number;
  /** Extra check on a matched text. */
  accept?: (match: string) => boolean;
  reason: (count: number, samples: string[]) => string;
}

interface Hit {
  cue: Cue;
  count: number;
  points: number;
  samples: string[];
}

/** One cue's weighted points over the whole conversation. */
interface CueTotal {
  cue: Cue;
  points: number;
  reason: string;
  /** The most points one message gave it; that message supplies the reason. */
  best: number;
}

const CODE_THRESHOLD = 3;
const MATH_THRESHOLD = 3;
const STEP_THRESHOLD = 3;
const COMBINED_THRESHOLD = 4;
const LONG_PROMPT_TOKENS = 2_000;
const MEDIUM_PROMPT_TOKENS = 500;
const CHARS_PER_TOKEN = 4;
const SCAN_HEAD_CHARS = 48_000;
const SCAN_TAIL_CHARS = 12_000;
/** The most text one message gives the scan: its head and tail. */
export const SCAN_MESSAGE_CHARS = SCAN_HEAD_CHARS + SCAN_TAIL_CHARS;
/** The most text scanned over a whole conversation. */
const SCAN_CONVERSATION_CHARS = 200_000;
const MAX_REASONS = 5;
const WEIGHT_LAST_USER = 1;
const WEIGHT_EARLIER_USER = 0.5;
const WEIGHT_SYSTEM = 0.25;

const quote = (samples: string[]): string =>
  samples.slice(0, 3).map((s) => s.replace(/\s+/g, ' ').trim().slice(0, 24)).join(', ');
const plural = (count: number, one: string, many: string): string =>
  `${count.toLocaleString('en-US')} ${count === 1 ? one : many}`;

const CUES: readonly Cue[] = [
  // ── code ──
  { id: 'fence', family: 'code', pattern: /^[ \t]{0,32}(?:```|~~~)/gm, points: 3, max: 3,
    reason: (n) => (n > 2 ? `contains ${Math.ceil(n / 2)} fenced code blocks` : 'contains a fenced code block') },
  { id: 'trace', family: 'code', points: 3, max: 3,
    pattern: /Traceback \(most recent call last\)|^[ \t]{1,32}at [\w.$<>]{1,200} \(?[^\s()]{1,500}:\d{1,7}(?::\d{1,7})?\)?[ \t]{0,32}$|^[ \t]{0,32}File "[^"\n]{1,500}", line \d|\bpanic: |\bSegmentation fault\b|\bcore dumped\b|\bException in thread\b/gm,
    reason: () => 'contains a stack trace' },
  { id: 'sql', family: 'code', points: 3, max: 3,
    pattern: /\bSELECT\s[^;]{0,200}?\sFROM\s|\b[Ss]elect\s{1,8}(?:\*|\w{1,64}\.\w|\w{1,64}\s{0,8},)[^;]{0,200}?\s[Ff]rom\s|\b(?:INSERT INTO|DELETE FROM|CREATE TABLE|ALTER TABLE|CREATE INDEX)\b|\bUPDATE\s{1,16}\w{1,64}\s{1,16}SET\b/g,
    reason: () => 'contains a SQL statement' },
  { id: 'write-code', family: 'code', points: 3, max: 3,
    pattern: /\b(?:write|create|implement|build|code|generate|give me)\s{1,8}(?:me\s{1,8})?(?:an?\s{1,8}|the\s{1,8}|some\s{1,8})?(?:[\w+#.-]{1,32}\s{1,8}){0,3}?(?:function|script|program|class|method|module|query|component|regex|endpoint|unit tests?|cli|algorithm)s?\b/gi,
    reason: (_n, s) => `asks to write code ("${quote(s)}")` },
  { id: 'syntax', family: 'code', points: 1.5, max: 4.5, distinct: true,
    pattern: /\bdef \w{1,64}\s{0,8}\(|\bfunction\s{0,8}(?:\*\s{0,8})?(?:\w{1,64}\s{0,8})?\([^)\n]{0,80}\)\s{0,8}\{|\b(?:const|var)\s{1,8}\w{1,64}\s{0,8}(?::\s{0,8}[\w<>[\]|]{1,64}\s{0,8})?=|^[ \t]{0,32}import\s{1,8}(?:[\w*{][^\n]{0,120}?\bfrom\s{1,8}['"]|['"]|[\w.]{1,128}(?:\s{1,8}as\s{1,8}\w{1,64})?[ \t]{0,8}(?:;[ \t]{0,8})?$)|^[ \t]{0,32}from\s{1,8}[\w.]{1,128}\s{1,8}import\s{1,8}[\w*(]|#include\s{0,8}[<"]|\bclass\s{1,8}[A-Z]\w{0,64}\s{0,8}(?:\([^)\n]{0,80}\)\s{0,8})?[:{]|\bclass\s{1,8}[A-Z]\w{0,64}\s{1,8}(?:extends|implements)\b|\)\s{0,8}=>|\bconsole\.log\(|\bprint\(|\bprintf\(|\bSystem\.out\.|\bpublic\s{1,8}(?:static\s{1,8})?(?:void|int|class|String)\b|\b(?:fn|func)\s{1,8}\w{1,64}\s{0,8}\(|\bawait\s{1,8}[\w.]{1,64}\(|\buse[A-Z]\w{1,64}\(/gm,
    reason: (_n, s) => `has code syntax (${quote(s)})` },
  { id: 'error-name', family: 'code', points: 2, max: 3, distinct: true,
    pattern: /\b[A-Z][a-z]{1,32}(?:[A-Z][a-z]{1,32}){0,8}(?:Error|Exception)\b|\b[Ee]rror (?:TS|CS|C)\d{3,5}\b|\b[Uu]ndefined is not a function\b|\b[Cc]annot read propert(?:y|ies) of (?:undefined|null)\b/g,
    reason: (_n, s) => `quotes an error message (${quote(s)})` },
  { id: 'dev-words', family: 'code', points: 1.5, max: 3, distinct: true,
    pattern: /\b(?:refactor\w{0,32}|debug\w{0,32}|compil(?:e|er|es|ing|ation)|regex(?:es)?|regular expressions?|unit tests?|stack trace|bugs?|buggy|linter|segfault|memory leak|race condition|null pointer|runtime error|syntax error|pull request|merge conflict)\b/gi,
    reason: (_n, s) => `uses programming words (${quote(s)})` },
  { id: 'my-code', family: 'code', points: 1.5, max: 1.5,
    pattern: /\b(?:my|this|the|following|your|our)\s{1,8}(?:\w{1,64}\s{1,8})?code\b|\bcode (?:snippet|review)|\bcodebase\b/gi,
    reason: () => 'refers to a piece of code' },
  { id: 'inline-code', family: 'code', points: 1, max: 2, pattern: /`[^`\n]{1,80}`/g,
    reason: (n) => `quotes inline code (${plural(n, 'span', 'spans')})` },
  { id: 'file-name', family: 'code', points: 1, max: 2, distinct: true,
    pattern: /(?<![\w-])[\w-]{1,64}\.(?:py|ts|tsx|js|jsx|mjs|cjs|java|go|rs|rb|cpp|hpp|cs|php|swift|kt|sql|sh|ipynb)\b/g,
    reason: (_n, s) => `names source files (${quote(s)})` },
  { id: 'language', family: 'code', points: 1, max: 2, distinct: true,
    pattern: /\b(?:python|typescript|javascript|node\.?js|java|c\+\+|c#|rust|golang|kotlin|ruby|php|sql|postgres(?:ql)?|mysql|sqlite|bash|powershell|react|vue|angular|django|flask|fastapi|pandas|numpy|dockerfile|kubernetes)(?![\w+#])/gi,
    reason: (_n, s) => `mentions ${quote(s)}` },
  // ── math ──
  { id: 'proof', family: 'math', points: 3, max: 3,
    pattern: /\b(?:prove|proof|theorem|lemma|corollary|by induction)\b/gi,
    reason: (_n, s) => `asks for a proof ("${quote(s)}")` },
  { id: 'math-words', family: 'math', points: 2, max: 4, distinct: true,
    pattern: /\b(?:integral|integrate|derivative|differentiate|probability|expected value|variance|solve for|matrix|matrices|eigen\w{0,32}|polynomial|equations?|logarithm|limit of|converges?|determinant|combinatorics)\b/gi,
    reason: (_n, s) => `uses math terms (${quote(s)})` },
  { id: 'latex', family: 'math', points: 2, max: 4,
    pattern: /\\(?:frac|d?int|iint|oint|sum|prod|sqrt|lim|partial|infty|mathbb|mathcal|cdot|leq|geq|neq|binom|alpha|beta|gamma|theta|lambda|sigma)\b|\$[^$\n]{1,120}\$/g,
    accept: (m) => m.startsWith('\\') || /[\\^_=]/.test(m),
    reason: () => 'contains LaTeX math' },
  { id: 'math-expr', family: 'math', points: 1, max: 3,
    pattern: /\b\d{1,32}(?:\.\d{1,32})?\s{0,8}[+*×÷^]\s{0,8}\d|\b\d{1,32}\s{1,8}[-/]\s{1,8}\d|\b[a-z]\s{0,8}(?:\^|\*\*)\s{0,8}\d|\b\d{0,32}[a-z]\s{0,8}[+\-*/]\s{0,8}\d{1,32}\s{0,8}=\s{0,8}-?\d|[∫∑∏√∂∞≤≥≠±]/gi,
    reason: (n) => `contains math expressions (${plural(n, 'match', 'matches')})` },
  // ── multi-step ──
  { id: 'step-by-step', family: 'steps', points: 2, max: 2,
    pattern: /\bstep[- ]by[- ]step\b|\bwalk me through\b|\bthink (?:it )?through\b|\bshow (?:your|all)(?: of your)? work\b/gi,
    reason: () => 'asks for step-by-step reasoning' },
  { id: 'numbered', family: 'steps', points: 2, max: 2, minCount: 3,
    pattern: /^[ \t]{0,32}(?:\d{1,2}[.)]|\(\d{1,2}\))[ \t]{1,8}\S/gm,
    reason: (n) => `lists ${n} numbered items` },
  { id: 'first-then', family: 'steps', points: 1.5, max: 1.5,
    pattern: /\bfirst(?:ly)?\b[\s\S]{0,300}?\b(?:then|next|after that|finally|second(?:ly)?)\b/gi,
    reason: () => 'orders its steps (first … then …)' },
  { id: 'questions', family: 'steps', points: 0.75, max: 3, minCount: 3, pattern: /\?(?=\s|$)/g,
    reason: (n) => `asks ${n} questions in one prompt` },
  { id: 'bullets', family: 'steps', points: 1, max: 1, minCount: 3, pattern: /^[ \t]{0,32}[-*•][ \t]{1,8}\S/gm,
    reason: (n) => `lists ${n} bullet points` },
  { id: 'plan-words', family: 'steps', points: 1, max: 4, distinct: true,
    pattern: /\b(?:plan|planning|design|architectures?|compare|comparison|contrast|trade-?offs?|pros and cons|analy[sz]e|analysis|strateg(?:y|ies)|roadmap|evaluate|recommend|in depth|in-depth|in detail|comprehensive)\b/gi,
    reason: (_n, s) => `uses planning/analysis words (${quote(s)})` },
];

/** Matched against the last user message with its leading whitespace trimmed. */
const SIMPLE_TASK =
  /^(?:(?:hi|hey|hello|please|kindly)\b[,!.]?\s{0,16}){0,8}(?:(?:can|could|would) you\s{1,16}(?:please\s{1,16})?)?(translate|summari[sz]e|classify|categori[sz]e|tl;?dr|paraphrase|rephrase|proofread|complete|autocomplete|extract|label|detect the language|what(?:'s| is) the sentiment)\b/i;

/** Every pattern run over caller text, by name, as fresh copies: for tests of how they are built. */
export function scanPatterns(): Array<{ id: string; pattern: RegExp }> {
  return [...CUES, { id: 'simple-task', pattern: SIMPLE_TASK }].map(({ id, pattern }) => ({ id, pattern: new RegExp(pattern) }));
}

/** Classifies a chat prompt for svc-auto. Pure and synchronous. */
export function classifyPrompt(messages: ChatMessage[]): Classification {
  const lastUser = findLastIndex(messages, (m) => m.role === 'user');
  const budgets = scanBudgets(messages, lastUser);
  const lastUserText = lastUser >= 0 ? scanWindow(messages[lastUser]?.content ?? '', budgets[lastUser] ?? 0) : '';
  const simpleTask = SIMPLE_TASK.exec(lastUserText.trimStart())?.[1]?.toLowerCase() ?? null;

  const cues = new Map<string, CueTotal>();
  let lastHits: Hit[] = [];
  messages.forEach((message, index) => {
    const isLastUser = index === lastUser;
    const weight = weightOf(message, isLastUser);
    const budget = budgets[index] ?? 0;
    if (weight === 0 || budget === 0) return;
    const hits = scanMessage(isLastUser ? lastUserText : scanWindow(message.content, budget));
    if (isLastUser) lastHits = hits;
    const discount = isLastUser && simpleTask !== null ? 0.5 : 1;
    for (const hit of hits) {
      const points = hit.points * (hit.cue.family === 'code' ? weight : weight * discount);
      addToTotal(cues, hit.cue, points, sourced(hit, message, isLastUser));
    }
  });

  const totals = [...cues.values()];
  const scoreOf = (family: Family): number =>
    round(totals.filter((t) => t.cue.family === family).reduce((sum, t) => sum + t.points, 0));
  const countOf = (id: string): number => lastHits.find((h) => h.cue.id === id)?.count ?? 0;
  const signals: ClassificationSignals = {
    promptTokens: estimateTokens(messages.filter((m) => m.role === 'user')),
    contextTokens: estimateTokens(messages),
    codeScore: scoreOf('code'),
    mathScore: scoreOf('math'),
    stepScore: scoreOf('steps'),
    fencedCodeBlocks: Math.ceil(countOf('fence') / 2),
    hasStackTrace: countOf('trace') > 0,
    questionCount: countOf('questions'),
    numberedItems: countOf('numbered'),
    simpleTask: simpleTask !== null,
  };
  return decide(signals, totals, simpleTask);
}

/**
 * Adds one message's weighted points for a cue. A cue never counts beyond its cap over
 * the whole conversation; its reason is taken from the message where it weighed most.
 */
function addToTotal(cues: Map<string, CueTotal>, cue: Cue, points: number, reason: string): void {
  const seen = cues.get(cue.id);
  if (seen === undefined) {
    cues.set(cue.id, { cue, points: Math.min(cue.max, points), reason, best: points });
    return;
  }
  seen.points = Math.min(cue.max, seen.points + points);
  if (points > seen.best) {
    seen.best = points;
    seen.reason = reason;
  }
}

function decide(signals: ClassificationSignals, totals: CueTotal[], simpleTask: string | null): Classification {
  const { codeScore, mathScore, stepScore, promptTokens } = signals;
  const lengthNote = `long prompt (${promptTokens.toLocaleString('en-US')} tokens est.)`;
  const long = promptTokens > LONG_PROMPT_TOKENS;

  if (codeScore >= CODE_THRESHOLD && codeScore >= mathScore) {
    const reasons = topReasons(totals, ['code']);
    if (long || mathScore >= MATH_THRESHOLD || stepScore >= STEP_THRESHOLD) {
      reasons.push(`${long ? lengthNote : 'also math or multi-step'}, but code cues decide`);
    }
    return { class: 'code', reasons, signals };
  }

  const lengthBonus = promptTokens > MEDIUM_PROMPT_TOKENS ? 1 : 0;
  const combined = codeScore + mathScore + stepScore + lengthBonus;
  const reasons: string[] = [];
  if (long) reasons.push(lengthNote);
  if (mathScore >= MATH_THRESHOLD) reasons.push(...topReasons(totals, ['math']));
  if (stepScore >= STEP_THRESHOLD) reasons.push(...topReasons(totals, ['steps']));
  if (reasons.length === 0 && combined >= COMBINED_THRESHOLD) {
    reasons.push('several moderate cues combine', ...topReasons(totals, ['code', 'math', 'steps']));
    if (lengthBonus > 0) reasons.push(`medium-length prompt (${promptTokens.toLocaleString('en-US')} tokens est.)`);
  }
  if (reasons.length > 0) return { class: 'complex', reasons: reasons.slice(0, MAX_REASONS + 1), signals };

  return { class: 'simple', reasons: simpleReasons(signals, totals, simpleTask), signals };
}

function simpleReasons(signals: ClassificationSignals, totals: CueTotal[], simpleTask: string | null): string[] {
  if (signals.contextTokens === 0 || signals.promptTokens === 0) {
    return ['no user text to classify'];
  }
  const reasons = [`short prompt (${signals.promptTokens.toLocaleString('en-US')} tokens est.)`];
  if (simpleTask !== null) reasons.push(`asks for a simple task (${simpleTask})`);
  reasons.push(totals.length === 0 ? 'no code, math or multi-step cues' : 'no strong code, math or multi-step cues');
  const weak = topReasons(totals, ['code', 'math', 'steps']).slice(0, 2);
  if (weak.length > 0) reasons.push(`weak cues only: ${weak.join('; ')}`);
  return reasons;
}

/** The reasons of the strongest cues in the given families, strongest first. */
function topReasons(totals: CueTotal[], families: Family[]): string[] {
  return totals
    .filter((total) => families.includes(total.cue.family))
    .sort((a, b) => b.points - a.points)
    .slice(0, MAX_REASONS)
    .map((total) => total.reason);
}

/** Every cue found in one message's text, with its unweighted points. */
function scanMessage(text: string): Hit[] {
  const hits: Hit[] = [];
  if (text.trim() === '') return hits;
  for (const cue of CUES) {
    const found = countMatches(cue, text);
    if (found.count === 0 || found.count < (cue.minCount ?? 1)) continue;
    hits.push({ cue, count: found.count, points: Math.min(cue.max, found.count * cue.points), samples: found.samples });
  }
  return hits;
}

/** Counts a cue's matches, stopping once its cap (and, for list cues, a display count) is reached. */
function countMatches(cue: Cue, text: string): { count: number; samples: string[] } {
  const limit = cue.minCount === undefined ? Math.ceil(cue.max / cue.points) : 99;
  const distinct = new Set<string>();
  const samples: string[] = [];
  let count = 0;
  for (const match of text.matchAll(cue.pattern)) {
    const matched = match[0];
    if (cue.accept !== undefined && !cue.accept(matched)) continue;
    if (cue.distinct === true) {
      const key = matched.toLowerCase().replace(/\s+/g, ' ');
      if (distinct.has(key)) continue;
      distinct.add(key);
    }
    count += 1;
    if (samples.length < 3) samples.push(matched);
    if (count >= limit) break;
  }
  return { count, samples };
}

function weightOf(message: ChatMessage, isLastUser: boolean): number {
  if (message.role === 'user') return isLastUser ? WEIGHT_LAST_USER : WEIGHT_EARLIER_USER;
  if (message.role === 'system') return WEIGHT_SYSTEM;
  return 0;
}

function sourced(hit: Hit, message: ChatMessage, isLastUser: boolean): string {
  const reason = hit.cue.reason(hit.count, hit.samples);
  if (isLastUser) return reason;
  return message.role === 'system' ? `${reason} in the system prompt` : `${reason} in an earlier message`;
}

/** Characters each message may have scanned: the last user message, then the rest from the last back. */
function scanBudgets(messages: ChatMessage[], lastUser: number): number[] {
  const budgets = messages.map(() => 0);
  const others = messages.map((_m, i) => messages.length - 1 - i).filter((i) => i !== lastUser);
  let left = SCAN_CONVERSATION_CHARS;
  for (const index of lastUser >= 0 ? [lastUser, ...others] : others) {
    const message = messages[index];
    if (message === undefined || left === 0 || weightOf(message, index === lastUser) === 0) continue;
    const budget = Math.min(left, SCAN_MESSAGE_CHARS);
    budgets[index] = budget;
    left -= Math.min(budget, message.content.length);
  }
  return budgets;
}

/** The text a message is scanned over: all of it, or its head and tail (4 : 1) when it is longer than `limit`. */
function scanWindow(content: string, limit: number): string {
  if (content.length <= limit) return content;
  const head = Math.round((limit * SCAN_HEAD_CHARS) / SCAN_MESSAGE_CHARS);
  return `${content.slice(0, head)}\n${content.slice(content.length - (limit - head))}`;
}

/** Characters / 4, ignoring surrounding whitespace. */
function estimateTokens(messages: ChatMessage[]): number {
  const chars = messages.reduce((sum, m) => sum + (typeof m.content === 'string' ? m.content.trim().length : 0), 0);
  return Math.ceil(chars / CHARS_PER_TOKEN);
}

function findLastIndex<T>(items: T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i -= 1) {
    const item = items[i];
    if (item !== undefined && predicate(item)) return i;
  }
  return -1;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
