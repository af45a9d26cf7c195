/**
 * `npm run train:auto`: trains svc-auto's classifier on data/auto/corpus, prints the
 * cross-validation and held-out figures, and writes data/auto/model.json.
 *
 * `npm run train:auto -- --tune` instead compares hyper-parameters by k-fold
 * cross-validation on the training set only (the held-out set is not read), and writes nothing.
 */
import { writeFileSync } from 'node:fs';
import { readCorpus, split } from '../src/gateway/auto/corpus.js';
import { DEFAULT_MODEL_URL, CLASSES, type Evaluation } from '../src/gateway/auto/model.js';
import { copiesOf, crossValidate, evaluate, toExample, train, TRAINING, type TrainingParams } from '../src/gateway/auto/train.js';
import { topTwo } from '../src/gateway/auto/classifier.js';

function table(evaluation: Evaluation): string {
  const width = 9;
  const head = `${'actual \\ predicted'.padEnd(20)}${CLASSES.map((c) => c.padStart(width)).join('')}   recall`;
  const rows = CLASSES.map((cls, c) => {
    const row = evaluation.confusion[c] ?? [];
    const recall = ((evaluation.perClass[cls] ?? 0) * 100).toFixed(1);
    return `${cls.padEnd(20)}${row.map((n) => String(n).padStart(width)).join('')}   ${recall.padStart(5)}%`;
  });
  return [head, ...rows].join('\n');
}

function tune(): void {
  const corpus = readCorpus();
  const { training } = split(corpus.prompts);
  const examples = training.map(toExample);
  const labels = examples.map((e) => e.label);
  const copies = copiesOf(corpus.augmented, training);
  const grid: Array<Partial<TrainingParams>> = [];
  for (const learningRate of [0.05, 0.1, 0.2]) {
    for (const l2 of [1e-5, 1e-4, 3e-4, 1e-3]) for (const epochs of [5, 10, 20]) grid.push({ learningRate, l2, epochs });
  }
  // How many buckets to keep: the file grows with it (two int8 a bucket).
  for (const keep of [120_000, 160_000, 200_000, 250_000, 300_000]) grid.push({ keep });
  for (const change of grid) {
    const params = { ...TRAINING, ...change };
    const oof = crossValidate(examples, params, copies);
    const result = evaluate(labels, oof.map((p) => topTwo(p)[0]));
    const recalls = CLASSES.map((c) => `${c} ${((result.perClass[c] ?? 0) * 100).toFixed(1)}`).join(', ');
    console.log(`${JSON.stringify(change)}: cv accuracy ${(result.accuracy * 100).toFixed(2)}% (${recalls})`);
  }
}

function main(): void {
  if (process.argv.includes('--tune')) return tune();
  const started = performance.now();
  const result = train(readCorpus());
  writeFileSync(DEFAULT_MODEL_URL, result.text);
  const { file } = result;
  console.log(`corpus ${file.corpus.prompts} prompts (sha256 ${file.corpus.sha256.slice(0, 12)}…): ${file.corpus.training} training, ${file.corpus.heldOut} held out; ${file.corpus.augmented} augmented copies of training prompts`);
  console.log(`${file.training.folds}-fold cross-validation on the training set: accuracy ${(file.crossValidation.accuracy * 100).toFixed(2)}%; unsure margin ${file.margin}`);
  console.log(`\nheld-out accuracy ${(file.heldOut.accuracy * 100).toFixed(2)}% over ${file.heldOut.prompts} prompts\n${table(file.heldOut)}`);
  const unsure = result.heldOut.filter(({ probabilities: p }) => {
    const [a, b] = topTwo(p);
    return (p[a] ?? 0) - (p[b] ?? 0) < file.margin;
  }).length;
  console.log(`\nunsure (top two within ${file.margin}): ${unsure} of ${file.heldOut.prompts} held-out prompts`);
  if (process.argv.includes('--errors')) {
    // Out-of-fold mistakes on the training set, for working on features; held-out prompts are never listed.
    for (const { prompt, probabilities: p } of result.crossValidationMistakes) {
      console.log(`  ${prompt.id} → ${CLASSES[topTwo(p)[0]]}: ${JSON.stringify(prompt.messages.at(-1)?.content.slice(0, 100))}`);
    }
  }
  console.log(`\nwrote ${DEFAULT_MODEL_URL.pathname} (${Math.round(result.text.length / 1024)} KB) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

main();
