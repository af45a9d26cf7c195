/**
 * svc-auto's classifier runs on every svc-auto request, on the caller's text, before any
 * credit check: its cost must stay linear and bounded. Each case here is the largest
 * prompt the gateway accepts (an 8 MiB body) in a shape that stresses one path of the
 * feature extractor: one huge message, one endless word, only symbols, only newlines or
 * indentation, backtick runs, other scripts, and a conversation of as many messages as
 * the body holds. There is no timing assertion: a bounded scan takes milliseconds.
 *
 * classifyPrompt is synchronous, and node:test cannot time out a test that blocks its
 * thread, so the calls run on a worker thread and the test's timeout fails a stuck one.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { BODY_LIMIT_BYTES } from '../../src/http/errors.js';
import type { ChatMessage } from '../../src/providers/types.js';

const TIMEOUT_MS = 20_000;
const CLASSES = ['simple', 'code', 'complex'];

/** A text of about `size` characters: `unit` repeated. */
const fill = (unit: string, size = BODY_LIMIT_BYTES - 1024): string => unit.repeat(Math.ceil(size / unit.length)).slice(0, size);

const ONE_MESSAGE: Record<string, string> = {
  'prose': fill('The quarterly report covers revenue, costs and headcount across all regions. '),
  'one endless word': fill('a'),
  'one endless camelCase_snake identifier': fill('aB_'),
  'digits only': fill('1234567890'),
  'symbols only': fill('{}();=<>[]+-*/^`$\\'),
  'backtick runs': fill('```'),
  'newlines only': fill('\n'),
  'indentation': fill('    x;\n'),
  'question marks': fill('?'),
  'CJK without spaces': fill('我们需要一个计划来比较这些选项'),
  'emoji and surrogates': fill('😀🙂'),
  'whitespace only': fill(' \t'),
};

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
    // A stuck worker stays stuck: once this test has timed out, the next gets a fresh one.
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
        classifier: new URL('../../src/gateway/auto/classifier.ts', import.meta.url).href,
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

describe('classifyPrompt: the largest prompt the gateway accepts, on every path', () => {
  const thread = new ClassifierThread();
  after(() => thread.close());

  for (const [name, text] of Object.entries(ONE_MESSAGE)) {
    it(`one message of ${text.length.toLocaleString('en-US')} characters: ${name}`, { timeout: TIMEOUT_MS }, async (t) => {
      assert.ok(CLASSES.includes(await thread.classify([{ role: 'user', content: text }], t.signal)));
      // The same text as a system prompt and an earlier turn, with a short last question.
      const context: ChatMessage[] = [
        { role: 'system', content: text },
        { role: 'user', content: text },
        { role: 'assistant', content: text },
        { role: 'user', content: 'and?' },
      ];
      assert.ok(CLASSES.includes(await thread.classify(context, t.signal)));
    });
  }

  it('a conversation of as many short messages as the body holds', { timeout: TIMEOUT_MS }, async (t) => {
    // `{"role":"user","content":"x"},` is about 30 bytes.
    const count = Math.floor(BODY_LIMIT_BYTES / 30);
    const messages: ChatMessage[] = Array.from({ length: count }, (_m, i) => ({
      role: i % 3 === 0 ? 'system' : i % 3 === 1 ? 'user' : 'assistant',
      content: i % 2 === 0 ? 'x' : '{',
    }));
    assert.ok(CLASSES.includes(await thread.classify(messages, t.signal)));
  });

  it('a conversation of large messages', { timeout: TIMEOUT_MS }, async (t) => {
    const message = fill('fn(a, b) { return a + b; } // why? ', 64 * 1024);
    const messages: ChatMessage[] = Array.from({ length: Math.floor(BODY_LIMIT_BYTES / message.length) }, (_m, i) => ({
      role: i % 2 === 0 ? 'user' : 'assistant', content: message,
    }));
    assert.ok(CLASSES.includes(await thread.classify(messages, t.signal)));
  });
});
