/**
 * svc-auto's training is reproducible and the shipped weights are its output: training on
 * the committed corpus here gives the bytes `npm run train:auto` wrote to
 * data/auto/model.json in another process. Also: the file's relative int8 encoding keeps
 * the probabilities, the split keeps every held-out prompt out of training, and a missing
 * or broken weights file is one clear error at boot.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { CorpusError, HELD_OUT_SHARE, isHeldOut, readCorpus, split } from '../../src/gateway/auto/corpus.js';
import { AutoModelError, CLASSES, DEFAULT_MODEL_URL, dequantize, keptCount, loadAutoModel, quantize } from '../../src/gateway/auto/model.js';
import { DIMENSIONS, extractFeatures, STRUCTURAL } from '../../src/gateway/auto/features.js';
import { crossValidate, evaluate, prng, train, TRAINING, type Example } from '../../src/gateway/auto/train.js';
import { probabilitiesOf, topTwo } from '../../src/gateway/auto/classifier.js';

describe('svc-auto training', () => {
  const corpus = readCorpus();

  // The shipped file was written by another process (`npm run train:auto`): the same bytes
  // from this one show that training is deterministic and that the file is its output.
  it('is deterministic, and data/auto/model.json is exactly what it produces', () => {
    const text = train(corpus).text;
    assert.ok(text === readFileSync(DEFAULT_MODEL_URL, 'utf8'),
      'data/auto/model.json is not what training on data/auto/corpus gives: training is not deterministic, or the file is stale (run `npm run train:auto` and commit it)');
  });

  it('records the corpus it was trained on, and stays small', () => {
    const model = loadAutoModel();
    assert.equal(model.file.corpus.sha256, corpus.sha256);
    assert.equal(model.file.corpus.prompts, corpus.prompts.length);
    // Hundreds of KB, not megabytes: the kept features (TRAINING.keep) bound it, whatever the hash size.
    assert.ok(readFileSync(DEFAULT_MODEL_URL).length < 800 * 1024);
    assert.equal(keptCount(model.file.kept), TRAINING.keep + STRUCTURAL.length);
    assert.equal(model.file.corpus.augmented, corpus.augmented.length);
  });

  // Issue 9's bar, scored here through the serving path, not read from the file's own record.
  it('gets at least 95% of the held-out prompts right, and at least 90% of each class', () => {
    const model = loadAutoModel();
    const { heldOut } = split(corpus.prompts);
    const predicted = heldOut.map((p) => topTwo(probabilitiesOf(model.weights, extractFeatures(p.messages)))[0]);
    const result = evaluate(heldOut.map((p) => CLASSES.indexOf(p.label)), predicted);
    assert.deepEqual(result, model.file.heldOut, 'the held-out figures recorded in the file are not what its weights score');
    assert.ok(result.accuracy >= 0.95, `held-out accuracy ${result.accuracy}`);
    for (const cls of CLASSES) assert.ok((result.perClass[cls] ?? 0) >= 0.9, `${cls}: recall ${result.perClass[cls]}`);
  });

  it('splits once: held-out and training are disjoint, each class at least 20% held out', () => {
    const { training, heldOut } = split(corpus.prompts);
    const ids = new Set(training.map((p) => p.id));
    assert.ok(heldOut.every((p) => !ids.has(p.id)));
    assert.equal(training.length + heldOut.length, corpus.prompts.length);
    for (const cls of CLASSES) {
      const all = corpus.prompts.filter((p) => p.label === cls).length;
      const held = heldOut.filter((p) => p.label === cls).length;
      assert.ok(all >= 300, `${cls}: ${all} prompts`);
      assert.ok(held / all >= 0.2 && held / all <= HELD_OUT_SHARE + 0.07, `${cls}: ${held} of ${all} held out`);
    }
    // The same prompts in another order split the same way.
    assert.deepEqual(split([...corpus.prompts].reverse()), { training, heldOut });
  });
});

describe('the weights file\'s encoding', () => {
  it('stores each feature\'s weights relative to the first class\'s, and gives the same probabilities', () => {
    const random = prng(7);
    const weights = new Float64Array(CLASSES.length * DIMENSIONS);
    const messages = [{ role: 'user' as const, content: 'Write a Dockerfile for a Node app, then estimate how many users one box serves?' }];
    const vector = extractFeatures(messages);
    const kept = [...new Set(Array.from(vector.index))].sort((a, b) => a - b);
    // Each class's weights on their own offset: only the differences between classes matter.
    for (const f of kept) CLASSES.forEach((_c, c) => { weights[f * CLASSES.length + c] = random() * 4 - 2 + 3 * c; });
    const full = probabilitiesOf(Float32Array.from(weights), vector);
    const { scales, kept: bitmap, data } = quantize(weights, kept);
    assert.equal(scales.length, CLASSES.length - 1);
    assert.equal(Buffer.from(data, 'base64').length, kept.length * (CLASSES.length - 1));
    const shipped = dequantize(scales, bitmap, data);
    for (const f of kept) assert.equal(shipped[f * CLASSES.length], 0);
    const stored = probabilitiesOf(shipped, vector);
    CLASSES.forEach((_c, c) => assert.ok(Math.abs((full[c] ?? 0) - (stored[c] ?? 0)) < 0.02, `${c}: ${full[c]} vs ${stored[c]}`));
  });
});

describe('loading the weights file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-auto-model-'));

  it('names a missing file and how to make it', () => {
    assert.throws(() => loadAutoModel(pathToFileURL(join(dir, 'none.json'))), (err: Error) =>
      err instanceof AutoModelError && /none\.json: cannot read it .*npm run train:auto/.test(err.message));
  });

  it('refuses a file that is not JSON, not a model, or truncated', () => {
    const good = JSON.parse(readFileSync(DEFAULT_MODEL_URL, 'utf8')) as { weights: string; features: { hashBits: number } };
    const bitmap = Buffer.from((good as unknown as { kept: string }).kept, 'base64');
    const beyond = Buffer.from(bitmap);
    beyond[beyond.length - 1] = 0xff;
    const cases: Array<[string, string, RegExp]> = [
      ['broken.json', '{"format": ', /broken\.json: .*JSON/],
      ['other.json', '{"hello": "world"}', /other\.json: not an svc-auto model file/],
      ['short.json', JSON.stringify({ ...good, weights: good.weights.slice(0, 100) }), /short\.json: weights hold \d+ bytes/],
      ['bitmap.json', JSON.stringify({ ...good, kept: bitmap.subarray(1).toString('base64') }), new RegExp(`bitmap\\.json: kept holds \\d+ bytes, not a bitmap of ${DIMENSIONS} features`)],
      ['beyond.json', JSON.stringify({ ...good, kept: beyond.toString('base64') }), /beyond\.json: kept marks features beyond the last one/],
      ['features.json', JSON.stringify({ ...good, features: { ...good.features, hashBits: 12 } }), /features\.json: .*other features/],
    ];
    for (const [name, text, pattern] of cases) {
      writeFileSync(join(dir, name), text);
      assert.throws(() => loadAutoModel(pathToFileURL(join(dir, name))), (err: Error) => err instanceof AutoModelError && pattern.test(err.message), name);
    }
  });
});

describe('augmented prompts (data/auto/corpus/augmented.jsonl)', () => {
  const line = (id: string, label: string, content: string, extra: object = {}) =>
    JSON.stringify({ id, label, messages: [{ role: 'user', content }], ...extra });
  // Ids on each side of the split, found by the split's own hash.
  const ids = Array.from({ length: 400 }, (_v, i) => `t-${i}`);
  const trainingId = ids.find((id) => !isHeldOut(id)) ?? '';
  const heldOutId = ids.find((id) => isHeldOut(id)) ?? '';

  function corpusDir(augmented: string[] | undefined): URL {
    const dir = mkdtempSync(join(tmpdir(), 'svc-auto-corpus-'));
    writeFileSync(join(dir, 'simple.jsonl'), `${line(trainingId, 'simple', 'what is the capital of Peru?')}\n${line(heldOutId, 'simple', 'hi there')}\n`);
    writeFileSync(join(dir, 'code.jsonl'), `${line('c-1', 'code', 'write a bash loop')}\n`);
    writeFileSync(join(dir, 'complex.jsonl'), `${line('x-1', 'complex', 'prove it')}\n`);
    if (augmented) writeFileSync(join(dir, 'augmented.jsonl'), augmented.join('\n'));
    return pathToFileURL(`${dir}/`);
  }

  it('reads copies of training prompts, apart from the corpus, and hashes them with it', () => {
    const copy = line('a-1', 'simple', '¿cuál es la capital de Perú?', { source: trainingId, how: 'translation: Spanish' });
    const corpus = readCorpus(corpusDir([copy]));
    assert.equal(corpus.prompts.length, 4);
    assert.deepEqual(corpus.augmented.map((a) => [a.id, a.source, a.how, a.label]), [['a-1', trainingId, 'translation: Spanish', 'simple']]);
    assert.notEqual(corpus.sha256, readCorpus(corpusDir(undefined)).sha256);
    assert.deepEqual(readCorpus(corpusDir(undefined)).augmented, []);
  });

  it('refuses a copy of a held-out prompt, of no prompt, with another label, a reused id or no how', () => {
    const cases: Array<[string, RegExp]> = [
      [line('a-1', 'simple', 'hola', { source: heldOutId, how: 'translation: Spanish' }), new RegExp(`augmented\\.jsonl:1: source ${heldOutId} is held out`)],
      [line('a-1', 'simple', 'hola', { source: 'nope', how: 'terse' }), /augmented\.jsonl:1: source nope is not a corpus prompt/],
      [line('a-1', 'code', 'hola', { source: trainingId, how: 'terse' }), new RegExp(`augmented\\.jsonl:1: label code, but its source ${trainingId} is simple`)],
      [line('c-1', 'simple', 'hola', { source: trainingId, how: 'terse' }), /augmented\.jsonl:1: duplicate id c-1/],
      [line('a-1', 'simple', 'hola', { source: trainingId }), /augmented\.jsonl:1: how: /],
      ['{"id": ', /augmented\.jsonl:1: not JSON/],
    ];
    for (const [text, pattern] of cases) {
      assert.throws(() => readCorpus(corpusDir([text])), (err: Error) => err instanceof CorpusError && pattern.test(err.message), text);
    }
  });

  it('cross-validation never scores a prompt with a model trained on its copy', () => {
    // Each prompt has one feature of its own and a random label: nothing else predicts it.
    // Scored out of fold, it is a guess (about a third right); were its copy (the same
    // feature, the same label) trained on in the fold that scores it, most would be right.
    const random = prng(7);
    const examples: Example[] = Array.from({ length: 300 }, (_v, i) => ({
      index: Int32Array.of(i), value: Float64Array.of(1), label: Math.floor(random() * 3),
    }));
    const copies = { examples: examples.map((e) => ({ ...e })), source: examples.map((_e, i) => i) };
    const params = { ...TRAINING, keep: 1_000 };
    const right = (oof: Float64Array[]) => oof.filter((p, i) => topTwo(p)[0] === examples[i]?.label).length / examples.length;
    assert.ok(right(crossValidate(examples, params, copies)) < 0.5, 'a copy trained the fold that scores its source');
    // The check can fail: copies that name the wrong source land in other folds than their prompt's.
    const misnamed = { examples: copies.examples, source: copies.source.map((s) => (s + 137) % examples.length) };
    assert.ok(right(crossValidate(examples, params, misnamed)) > 0.6);
  });
});
