/**
 * Every pattern the classifier runs over caller text, fed its worst case at the largest
 * size it scans: one message of SCAN_MESSAGE_CHARS, and a conversation of about as many
 * such messages as an 8 MiB body holds. There is no timing assertion: these finish in
 * milliseconds, and a backtracking pattern takes seconds to hours.
 *
 * classifyPrompt is synchronous, and node:test cannot time out a test that blocks its
 * thread (it passes once the call returns, however late). So the calls run on a worker
 * thread: a pattern that backtracks blocks the worker, and the test's timeout fails it.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { SCAN_MESSAGE_CHARS, scanPatterns } from '../../src/gateway/classifier.js';
import type { ChatMessage } from '../../src/providers/types.js';

const TIMEOUT_MS = 10_000;
/** About as many SCAN_MESSAGE_CHARS messages as the 8 MiB body limit lets through: 38 times the scan budget. */
const BODY_LIMIT_MESSAGES = 128;
const CLASSES = ['simple', 'code', 'complex'];

/** Text repeated up to the size scanned, between a prefix and a suffix. */
type WorstCase = [prefix: string, unit: string, suffix?: string];

/** For each pattern, the texts that made an unbounded version of it backtrack. */
const WORST_CASES: Record<string, WorstCase[]> = {
  'fence': [['', ' '], ['', '\t', '`']],
  'trace': [['  at x ', '1:'], ['  at x (', ' ', ')'], ['  File "', 'a'], ['', ' at '], ['\n', '\t']],
  'sql': [['SELECT', ' '], ['', 'select a.'], ['', 'select a, '], ['UPDATE', ' '], ['UPDATE x ', 'a'], ['', 'SELECT ']],
  'write-code': [['write ', 'a '], ['write', ' ', 'x'], ['', 'code '], ['write ', 'a'], ['', 'write me a ']],
  'syntax': [
    ['function', ' '], ['', 'function '], ['import x', ' ', 'y'], ['import', ' '], ['import x from ', 'a '],
    ['', '\nimport x '], ['class A', ' '], ['', 'class A '], ['def ', ' '], ['def ', 'a'], ['const x', ' '],
    ['const x:', ' '], [')', ' '], ['await ', 'a'], ['useA', 'a'], ['#include', ' '], ['from x', ' '],
  ],
  'error-name': [['', 'Aa'], ['', 'Error '], ['A', 'a']],
  'dev-words': [['debug', 'a'], ['', 'debug']],
  'my-code': [['my', ' '], ['', 'my '], ['my ', 'a']],
  'inline-code': [['', '`'], ['', '`a'], ['`', 'a']],
  'file-name': [['', 'a-'], ['', 'a.'], ['', '-'], ['', 'a']],
  'language': [['', 'c++'], ['', 'java']],
  'proof': [['', 'prove ']],
  'math-words': [['eigen', 'a']],
  'latex': [['', '$'], ['', '\\'], ['', '$a'], ['$', 'a']],
  'math-expr': [['', '1'], ['', '1 '], ['', '1.'], ['1', ' '], ['', '1+'], ['1', 'a']],
  'step-by-step': [['', 'step by ']],
  'numbered': [['', '\n1. '], ['\n', ' ']],
  'first-then': [['', 'first '], ['first ', 'a']],
  'questions': [['', '?']],
  'bullets': [['', '- '], ['\n', ' ']],
  'plan-words': [['', 'plan ']],
  'simple-task': [['', 'hi '], ['', 'hello, '], ['', ' ', 'translate'], ['can you ', 'please ']],
};

function worstText([prefix, unit, suffix = '']: WorstCase): string {
  const body = SCAN_MESSAGE_CHARS - prefix.length - suffix.length;
  return prefix + unit.repeat(Math.ceil(body / unit.length)).slice(0, body) + suffix;
}

/** The repetitions left once escapes and character classes are taken out: `*`, `+`, `{n,}`. */
function unboundedRepetitions(pattern: RegExp): string[] {
  const bare = pattern.source.replace(/\\./g, '').replace(/\[[^\]]*\]/g, '');
  return bare.match(/[*+]|\{\d+,\}/g) ?? [];
}

/** classifyPrompt on a worker thread: it imports the classifier through tsx, like this file. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
import(workerData.tsx)
  .then(({ tsImport }) => tsImport(workerData.classifier, workerData.classifier))
  .then(({ classifyPrompt }) => parentPort.on('message', ({ id, messages }) => {
    parentPort.postMessage({ id, class: classifyPrompt(messages).class });
  }));
`;

class ClassifierThread {
  private readonly waiting = new Map<number, { resolve: (cls: string) => void; reject: (error: Error) => void }>();
  private nextId = 0;
  private worker = this.start();

  classify(messages: ChatMessage[], signal: AbortSignal): Promise<string> {
    const id = this.nextId++;
    // A worker stuck in a pattern stays stuck: once this test has timed out, the next gets a fresh one.
    const restart = (): void => void this.restart();
    signal.addEventListener('abort', restart, { once: true });
    return new Promise((resolve, reject) => {
      const settled = (): void => signal.removeEventListener('abort', restart);
      this.waiting.set(id, {
        resolve: (cls) => { settled(); resolve(cls); },
        reject: (error) => { settled(); reject(error); },
      });
      this.worker.postMessage({ id, messages });
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }

  private async restart(): Promise<void> {
    const stuck = this.worker;
    this.waiting.clear();
    this.worker = this.start();
    await stuck.terminate();
  }

  private start(): Worker {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: {
        tsx: import.meta.resolve('tsx/esm/api'),
        classifier: new URL('../../src/gateway/classifier.ts', import.meta.url).href,
      },
    });
    worker.on('message', (reply: { id: number; class: string }) => {
      this.waiting.get(reply.id)?.resolve(reply.class);
      this.waiting.delete(reply.id);
    });
    worker.on('error', (error: Error) => {
      for (const waiter of this.waiting.values()) waiter.reject(error);
      this.waiting.clear();
    });
    return worker;
  }
}

describe('classifyPrompt: every pattern at its worst case', () => {
  const patterns = scanPatterns();
  const thread = new ClassifierThread();
  after(() => thread.close());

  it('has worst cases for exactly the patterns it runs', () => {
    assert.deepEqual(Object.keys(WORST_CASES).sort(), patterns.map((p) => p.id).sort());
  });

  it('bounds every repetition in every pattern', () => {
    for (const { id, pattern } of patterns) assert.deepEqual(unboundedRepetitions(pattern), [], `${id}: ${pattern.source}`);
  });

  for (const { id } of patterns) {
    it(`${id}: one message of ${SCAN_MESSAGE_CHARS.toLocaleString('en-US')} characters, then a conversation`, { timeout: TIMEOUT_MS }, async (t) => {
      const texts = (WORST_CASES[id] ?? []).map(worstText);
      for (const text of texts) {
        assert.ok(CLASSES.includes(await thread.classify([{ role: 'user', content: text }], t.signal)), JSON.stringify(text.slice(0, 40)));
      }
      const conversation: ChatMessage[] = Array.from({ length: BODY_LIMIT_MESSAGES }, (_m, i) => ({
        role: i === 0 ? 'system' : 'user',
        content: texts[i % texts.length] ?? '',
      }));
      assert.ok(CLASSES.includes(await thread.classify(conversation, t.signal)));
    });
  }
});
