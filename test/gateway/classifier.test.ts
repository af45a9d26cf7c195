import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { classifyPrompt, type Classification, type PromptClass } from '../../src/gateway/classifier.js';
import type { ChatMessage } from '../../src/providers/types.js';

const user = (content: string): ChatMessage[] => [{ role: 'user', content }];

function assertClass(result: Classification, expected: PromptClass, prompt: string): void {
  assert.equal(result.class, expected, `${JSON.stringify(prompt.slice(0, 80))} → ${result.reasons.join(' | ')}`);
  assert.ok(result.reasons.length > 0, 'reasons are never empty');
  for (const reason of result.reasons) assert.ok(reason.trim().length > 0);
}

function reasonsMatch(result: Classification, pattern: RegExp): boolean {
  return result.reasons.some((reason) => pattern.test(reason));
}

const SIMPLE: string[] = [
  "What's the capital of Australia?",
  "Translate 'good morning' into Spanish",
  'Summarize this paragraph: The city council met on Tuesday to discuss a plan to redesign the downtown ' +
    'park. Members compared several proposals and agreed on a strategy to analyze costs before the next ' +
    'meeting. A final vote is expected in March.',
  'Classify the sentiment of this review as positive, negative or neutral: "The battery died after two days ' +
    'and support never answered. Would not buy again."',
  'Hi! How are you today?',
  'Complete this sentence: The quick brown fox',
  'Who wrote Pride and Prejudice?',
  'What is 2 + 2?',
  'What are the import tariffs on steel in the EU?',
  'Select the best option from the list below: apples, pears, plums.',
];

const TRACEBACK =
  'Why does this fail?\n\nTraceback (most recent call last):\n  File "app.py", line 12, in <module>\n' +
  "    total = price + tax\nTypeError: unsupported operand type(s) for +: 'int' and 'str'";

const CODE: string[] = [
  TRACEBACK,
  'Write a TypeScript function that debounces another function, with proper generics for the arguments.',
  'This query returns duplicate rows, how do I fix it?\n' +
    'SELECT u.name, o.total FROM users u JOIN orders o ON o.user_id = u.id WHERE o.total > 100;',
  'Refactor this React component to use hooks instead of a class:\n```jsx\n' +
    'class Counter extends React.Component {\n  state = { count: 0 };\n' +
    '  render() { return <button onClick={() => this.setState({ count: this.state.count + 1 })}>' +
    '{this.state.count}</button>; }\n}\n```',
  'Write a bash script that backs up /var/www to S3 every night.',
  "I get `Cannot read properties of undefined (reading 'map')` in my Next.js page. How do I debug this?",
  'Fix the bug in my code: it loops forever.',
  'Why is my regex `^\\d+$` not matching "12a" in JavaScript?',
  'Add unit tests for this:\n\ndef slugify(title):\n    return title.lower().replace(" ", "-")',
];

const CODE_REASONS: Array<[string, RegExp]> = [
  [TRACEBACK, /stack trace/],
  [CODE[1] ?? '', /write code/],
  [CODE[2] ?? '', /SQL/],
  [CODE[3] ?? '', /fenced code block/],
];

const COMPLEX: string[] = [
  'Prove that there are infinitely many prime numbers.',
  'Create a step-by-step business plan for launching a specialty coffee shop. Cover:\n' +
    '1. market analysis\n2. financing\n3. staffing\n4. marketing and launch',
  'Compute the integral of x^2 sin(x) from 0 to pi.',
  'Evaluate $\\int_0^1 \\frac{x}{1+x^2} dx$.',
  'Compare three architectures for our order system (a monolith, microservices, and serverless functions) ' +
    'and recommend one, explaining the trade-offs.',
  'We are moving our family to a new city next year. What neighborhoods should we consider? How should we ' +
    'budget for the move? What is the best time of year to move? Should we rent first or buy right away?',
  'Solve for x: 3x + 7 = 22',
  'A 2x2 matrix A = [[2,1],[1,2]]. Find its eigenvalues and eigenvectors.',
  'Analyze the probability that our startup strategy succeeds.',
];

const COMPLEX_REASONS: Array<[string, RegExp]> = [
  [COMPLEX[0] ?? '', /proof/],
  [COMPLEX[1] ?? '', /step-by-step/],
  [COMPLEX[3] ?? '', /LaTeX/],
  [COMPLEX[4] ?? '', /planning\/analysis words \(Compare, architectures/],
  [COMPLEX[5] ?? '', /4 questions/],
  [COMPLEX[8] ?? '', /several moderate cues combine/],
];

describe('classifyPrompt: simple', () => {
  for (const prompt of SIMPLE) {
    it(prompt.slice(0, 60), () => assertClass(classifyPrompt(user(prompt)), 'simple', prompt));
  }

  it('says a translation is a simple task and why', () => {
    const result = classifyPrompt(user(SIMPLE[1] ?? ''));
    assert.ok(reasonsMatch(result, /simple task \(translate\)/), result.reasons.join(' | '));
    assert.ok(reasonsMatch(result, /short prompt \(\d+ tokens est\.\)/));
    assert.equal(result.signals.simpleTask, true);
  });
});

describe('classifyPrompt: code', () => {
  for (const prompt of CODE) {
    it(prompt.slice(0, 60).replace(/\n/g, ' '), () => assertClass(classifyPrompt(user(prompt)), 'code', prompt));
  }

  for (const [prompt, pattern] of CODE_REASONS) {
    it(`names the deciding cue ${pattern}`, () => {
      const result = classifyPrompt(user(prompt));
      assert.ok(reasonsMatch(result, pattern), result.reasons.join(' | '));
    });
  }

  it('reports code signals', () => {
    const traceback = classifyPrompt(user(TRACEBACK));
    assert.equal(traceback.signals.hasStackTrace, true);
    assert.ok(traceback.signals.codeScore >= 3);
    assert.equal(classifyPrompt(user(CODE[3] ?? '')).signals.fencedCodeBlocks, 1);
  });

  it('keeps a long, multi-step debugging question as code', () => {
    const steps = '1. reproduce it\n2. find the cause\n3. propose a fix\n4. add a regression test\n';
    const log = 'worker 7 picked job 1234 from the queue and started processing it\n'.repeat(150);
    const prompt = `${TRACEBACK}\n\nHere is the log:\n${log}\nWalk me through it step by step:\n${steps}`;
    const result = classifyPrompt(user(prompt));
    assertClass(result, 'code', prompt);
    assert.ok(result.signals.promptTokens > 2_000);
    assert.ok(result.signals.stepScore >= 3);
    assert.ok(reasonsMatch(result, /stack trace/));
    assert.ok(reasonsMatch(result, /long prompt .* but code cues decide/), result.reasons.join(' | '));
  });
});

describe('classifyPrompt: complex', () => {
  for (const prompt of COMPLEX) {
    it(prompt.slice(0, 60).replace(/\n/g, ' '), () => assertClass(classifyPrompt(user(prompt)), 'complex', prompt));
  }

  for (const [prompt, pattern] of COMPLEX_REASONS) {
    it(`names the deciding cue ${pattern}`, () => {
      const result = classifyPrompt(user(prompt));
      assert.ok(reasonsMatch(result, pattern), result.reasons.join(' | '));
    });
  }

  it('treats a long prompt as complex and says how long', () => {
    const prompt =
      'Here are my notes from this quarter. ' +
      'Revenue grew in the north, costs rose in the south and hiring slowed everywhere. '.repeat(120) +
      'What do you make of it?';
    const result = classifyPrompt(user(prompt));
    assertClass(result, 'complex', prompt);
    assert.ok(reasonsMatch(result, /^long prompt \(\d{1,3}(,\d{3})* tokens est\.\)$/), result.reasons.join(' | '));
    assert.equal(result.signals.promptTokens, Math.ceil(prompt.length / 4));
  });
});

describe('classifyPrompt: where the text comes from', () => {
  it('does not let the system prompt alone make a trivial question complex', () => {
    const messages: ChatMessage[] = [
      {
        role: 'system',
        content:
          'You are a meticulous assistant. Think step by step, analyze every question in depth, compare ' +
          'options, plan your answer, and show your work. Prove every claim.',
      },
      { role: 'user', content: "What's the capital of France?" },
    ];
    const result = classifyPrompt(messages);
    assertClass(result, 'simple', 'system + capital of France');
    assert.ok(reasonsMatch(result, /in the system prompt/), result.reasons.join(' | '));
  });

  it('weighs the last user message over earlier ones', () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Prove that the square root of 2 is irrational.' },
      { role: 'assistant', content: 'Suppose √2 = p/q in lowest terms; then p² = 2q², so p is even…' },
      { role: 'user', content: 'Thanks! What is the capital of Peru?' },
    ];
    assertClass(classifyPrompt(messages), 'simple', 'earlier proof, then a factual question');
  });

  it('ignores assistant messages', () => {
    const messages: ChatMessage[] = [
      { role: 'assistant', content: '```python\ndef main():\n    print("hello")\n```\nTraceback (most recent call last):' },
      { role: 'user', content: 'Great, thank you!' },
    ];
    assertClass(classifyPrompt(messages), 'simple', 'assistant code, user thanks');
  });

  it('scans a conversation back from the last message only until its budget is spent', () => {
    const report = 'The quarterly report covers revenue, costs and headcount across all regions. '.repeat(800);
    const conversation = (reports: number): ChatMessage[] => [
      { role: 'user', content: 'Prove that the square root of 2 is irrational.' },
      ...Array.from({ length: reports }, (): ChatMessage => ({ role: 'user', content: report })),
      { role: 'user', content: 'What is the capital of Peru?' },
    ];
    assert.ok(classifyPrompt(conversation(2)).signals.mathScore > 0, 'the proof is within 200,000 characters');
    assert.equal(classifyPrompt(conversation(4)).signals.mathScore, 0, 'the proof is beyond them');
  });

  it('still classifies a complex last question under a plain system prompt', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: COMPLEX[0] ?? '' },
    ];
    assertClass(classifyPrompt(messages), 'complex', 'plain system + proof');
  });
});

describe('classifyPrompt: edge cases', () => {
  it('calls empty and whitespace-only content simple', () => {
    for (const content of ['', '   ', '\n\t \n']) {
      const result = classifyPrompt(user(content));
      assertClass(result, 'simple', JSON.stringify(content));
      assert.equal(result.signals.promptTokens, 0);
    }
  });

  it('calls no messages at all simple', () => {
    assertClass(classifyPrompt([]), 'simple', '[]');
  });

  it('returns for a 200 KB prompt', () => {
    const prose = 'The quarterly report covers revenue, costs and headcount across all regions. '.repeat(2_700);
    const result = classifyPrompt(user(prose));
    assert.ok(prose.length > 200_000);
    assert.equal(result.class, 'complex');

    const adversarial = 'first SELECT $ write a ` '.repeat(8_500);
    assert.ok(adversarial.length > 200_000);
    assert.ok(['simple', 'code', 'complex'].includes(classifyPrompt(user(adversarial)).class));
  });
});
