import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeGemini, type FakeGemini } from '../../support/fake-gemini.js';

const KEY = 'AIza-test-key';

describe('the fake Gemini upstream refuses what Gemini refuses (so the adapter tests prove something)', () => {
  let upstream: FakeGemini;
  before(async () => {
    upstream = await startFakeGemini();
  });
  after(() => upstream.close());

  const post = async (body: Record<string, unknown>, path = '/v1beta/models/gemini-ok:generateContent') => {
    const response = await fetch(`${upstream.url}${path}`, { method: 'POST', headers: { 'x-goog-api-key': KEY }, body: JSON.stringify(body) });
    return { status: response.status, text: await response.text() };
  };
  const user = (text: string) => ({ role: 'user', parts: [{ text }] });
  const generationConfig = { maxOutputTokens: 10 };
  const call = (signature?: string) => ({ role: 'model', parts: [{ functionCall: { name: 'f', args: {} }, ...(signature && { thoughtSignature: signature }) }] });
  const result = (name: string) => ({ role: 'user', parts: [{ functionResponse: { name, response: {} } }] });

  it('answers a proper request', async () => {
    assert.equal((await post({ contents: [user('hi')], generationConfig })).status, 200);
    assert.equal((await post({ contents: [user('hi'), call('s'), result('f')], generationConfig })).status, 200);
  });

  it('refuses roles other than user/model, turns out of alternation, empty texts, no maxOutputTokens, unknown fields', async () => {
    for (const body of [
      { contents: [{ role: 'assistant', parts: [{ text: 'x' }] }], generationConfig },
      { contents: [user('a'), user('b')], generationConfig },
      { contents: [user('')], generationConfig },
      { contents: [user('hi')] },
      { contents: [user('hi')], generationConfig: { max_tokens: 10 } },
      { contents: [user('hi')], generationConfig, messages: [] },
    ]) {
      const { status, text } = await post(body);
      assert.equal(status, 400, JSON.stringify(body));
      assert.match(text, /"status":"INVALID_ARGUMENT"/);
    }
  });

  it('refuses a function result that answers no call of the turn before, and a replayed call without a thought signature', async () => {
    assert.equal((await post({ contents: [user('hi'), call('s'), result('g')], generationConfig })).status, 400);
    assert.equal((await post({ contents: [user('hi'), call(), result('f')], generationConfig })).status, 400);
  });

  it('refuses a key in the URL, and a request without a key', async () => {
    assert.equal((await post({ contents: [user('hi')], generationConfig }, `/v1beta/models/gemini-ok:generateContent?key=${KEY}`)).status, 400);
    const keyless = await fetch(`${upstream.url}/v1beta/models/gemini-ok:generateContent`, { method: 'POST', body: JSON.stringify({ contents: [user('hi')], generationConfig }) });
    assert.equal(keyless.status, 403);
    await keyless.text();
  });
});
