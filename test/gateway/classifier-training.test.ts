/**
 * svc-auto's training is reproducible and the shipped weights are its output: training on
 * the committed corpus twice gives the same bytes, and those bytes are data/auto/model.json.
 * Also: the split keeps every held-out prompt out of training, and a missing or broken
 * weights file is one clear error at boot.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { HELD_OUT_SHARE, readCorpus, split } from '../../src/gateway/auto/corpus.js';
import { AutoModelError, CLASSES, DEFAULT_MODEL_URL, loadAutoModel } from '../../src/gateway/auto/model.js';
import { STRUCTURAL } from '../../src/gateway/auto/features.js';
import { train, TRAINING } from '../../src/gateway/auto/train.js';

describe('svc-auto training', () => {
  const corpus = readCorpus();

  it('is deterministic, and data/auto/model.json is exactly what it produces', () => {
    const first = train(corpus).text;
    const second = train(corpus).text;
    assert.equal(first, second, 'two trainings on one corpus differ');
    assert.ok(first === readFileSync(DEFAULT_MODEL_URL, 'utf8'), 'data/auto/model.json is not what `npm run train:auto` writes from data/auto/corpus: retrain and commit it');
  });

  it('records the corpus it was trained on, and stays small', () => {
    const model = loadAutoModel();
    assert.equal(model.file.corpus.sha256, corpus.sha256);
    assert.equal(model.file.corpus.prompts, corpus.prompts.length);
    // Hundreds of KB, not megabytes: the kept features (TRAINING.keep) bound it, whatever the hash size.
    assert.ok(readFileSync(DEFAULT_MODEL_URL).length < 600 * 1024);
    assert.equal(Buffer.from(model.file.kept, 'base64').length / 4, TRAINING.keep + STRUCTURAL.length);
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

describe('loading the weights file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-auto-model-'));

  it('names a missing file and how to make it', () => {
    assert.throws(() => loadAutoModel(pathToFileURL(join(dir, 'none.json'))), (err: Error) =>
      err instanceof AutoModelError && /none\.json: cannot read it .*npm run train:auto/.test(err.message));
  });

  it('refuses a file that is not JSON, not a model, or truncated', () => {
    const good = JSON.parse(readFileSync(DEFAULT_MODEL_URL, 'utf8')) as { weights: string; features: { hashBits: number } };
    const descending = Buffer.from(Uint32Array.from([5, 3]).buffer).toString('base64');
    const cases: Array<[string, string, RegExp]> = [
      ['broken.json', '{"format": ', /broken\.json: .*JSON/],
      ['other.json', '{"hello": "world"}', /other\.json: not an svc-auto model file/],
      ['short.json', JSON.stringify({ ...good, weights: good.weights.slice(0, 100) }), /short\.json: weights hold \d+ bytes/],
      ['order.json', JSON.stringify({ ...good, kept: descending, weights: Buffer.alloc(12).toString('base64') }), /order\.json: kept feature 1 is 3: not ascending/],
      ['features.json', JSON.stringify({ ...good, features: { ...good.features, hashBits: 12 } }), /features\.json: .*other features/],
    ];
    for (const [name, text, pattern] of cases) {
      writeFileSync(join(dir, name), text);
      assert.throws(() => loadAutoModel(pathToFileURL(join(dir, name))), (err: Error) => err instanceof AutoModelError && pattern.test(err.message), name);
    }
  });
});
