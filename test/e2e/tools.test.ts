/**
 * Tool calling through the gateway with the openai SDK: tools and tool_choice
 * reach the upstream, the model's calls come back (JSON and streamed deltas),
 * the follow-up turn with the calls and their results is forwarded, and the
 * call is billed like any answer.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type OpenAI from 'openai';
import { countWords, TOOL_ARGUMENT_PIECES } from '../support/fake-upstream.js';
import { fakeUpstreamConfig, useGatewayWithUpstream } from '../support/gateway.js';
import { assertError, call, credits } from '../support/e2e.js';

const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [{
  type: 'function',
  function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
}];
const question = { role: 'user' as const, content: 'What is the weather in Paris?' };
const ARGUMENTS = TOOL_ARGUMENT_PIECES.join('');

describe('tool calling', () => {
  const env = useGatewayWithUpstream((url) => fakeUpstreamConfig(url, { 'svc-fast': ['svc-fast-tools'] }));

  it('forwards tools and tool_choice and returns the call (JSON), billed by the upstream usage', async () => {
    const { gw, upstream } = env;
    upstream.reset();
    const account = await gw.createAccount({ purchased: 10_000 });
    const completion = await gw.client(account.key).chat.completions.create({
      model: 'svc-fast', messages: [question], tools, tool_choice: 'auto',
    });
    const sent = upstream.requests[0]!.body;
    assert.deepEqual(sent.tools, tools);
    assert.equal(sent.tool_choice, 'auto');
    const choice = completion.choices[0]!;
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    assert.deepEqual(choice.message.tool_calls, [{ id: 'call_fake_1', type: 'function', function: { name: 'get_weather', arguments: ARGUMENTS } }]);
    const prompt = countWords(question.content);
    assert.deepEqual(completion.usage, { prompt_tokens: prompt, completion_tokens: countWords(ARGUMENTS), total_tokens: prompt + countWords(ARGUMENTS) });
    const used = (completion as unknown as { svc: { credits_used: number } }).svc.credits_used;
    assert.equal(used, Math.ceil((prompt * 4 + countWords(ARGUMENTS) * 12) / 1000));
    assert.equal((await credits(gw, account.key)).total_credits, 10_000 - used);
  });

  it('streams the call as tool_calls deltas the SDK assembles', async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    const stream = await gw.client(account.key).chat.completions.create({ model: 'svc-fast', messages: [question], tools, stream: true });
    let id = '';
    let name = '';
    let args = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const call of choice?.delta.tool_calls ?? []) {
        assert.equal(call.index, 0);
        id ||= call.id ?? '';
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
      }
      finish = choice?.finish_reason ?? finish;
    }
    assert.deepEqual({ id, name, args, finish }, { id: 'call_fake_1', name: 'get_weather', args: ARGUMENTS, finish: 'tool_calls' });
  });

  it('accepts an assistant turn with tool_calls and no content at all, but not a user turn without content', async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    const ok = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'svc-fast', messages: [
      question,
      { role: 'assistant', tool_calls: [{ id: 'call_fake_1', type: 'function', function: { name: 'get_weather', arguments: ARGUMENTS } }] },
      { role: 'tool', tool_call_id: 'call_fake_1', content: '18' },
    ] } });
    assert.equal(ok.status, 200, ok.text);
    const bad = await call(gw, 'POST', '/v1/chat/completions', { key: account.key, body: { model: 'svc-fast', messages: [{ role: 'user' }] } });
    assertError(bad, 400, 'invalid_request_error', 'invalid_value', 'messages[0].content');
  });

  it('forwards parallel_tool_calls with tools, and neither it nor tool_choice without them', async () => {
    const { gw, upstream } = env;
    upstream.reset();
    const account = await gw.createAccount({ purchased: 10_000 });
    const client = gw.client(account.key);
    await client.chat.completions.create({ model: 'svc-fast', messages: [question], tools, tool_choice: 'required', parallel_tool_calls: false });
    await client.chat.completions.create({ model: 'svc-fast', messages: [question], tool_choice: 'none', parallel_tool_calls: false });
    const [withTools, without] = upstream.requests.map((r) => r.body);
    assert.deepEqual([withTools!.tool_choice, withTools!.parallel_tool_calls], ['required', false]);
    assert.deepEqual([without!.tools, without!.tool_choice, without!.parallel_tool_calls], [undefined, undefined, undefined]);
  });

  it('forwards the assistant turn with its calls and the tool result', async () => {
    const { gw, upstream } = env;
    upstream.reset();
    const account = await gw.createAccount({ purchased: 10_000 });
    await gw.client(account.key).chat.completions.create({
      model: 'svc-fast',
      messages: [
        question,
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake_1', type: 'function', function: { name: 'get_weather', arguments: ARGUMENTS } }] },
        { role: 'tool', tool_call_id: 'call_fake_1', content: '{"temperature": 18}' },
      ],
    });
    assert.deepEqual(upstream.requests[0]!.body.messages, [
      { role: 'user', content: question.content },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_fake_1', type: 'function', function: { name: 'get_weather', arguments: ARGUMENTS } }] },
      { role: 'tool', content: '{"temperature": 18}', tool_call_id: 'call_fake_1' },
    ]);
    assert.equal(upstream.requests[0]!.body.tools, undefined, 'no tools were sent, so none are forwarded');
  });
});

describe('an upstream that cannot stream', () => {
  const env = useGatewayWithUpstream((url) => fakeUpstreamConfig(url, { 'svc-fast': ['svc-fast-nostream'], 'svc-code': ['svc-code-nostream-tools'] }), { reply: 'whole answers only' });

  it('still serves JSON and streaming clients, text and tool calls, from its JSON answers', async () => {
    const { gw } = env;
    const account = await gw.createAccount({ purchased: 10_000 });
    const client = gw.client(account.key);
    const json = await client.chat.completions.create({ model: 'svc-fast', messages: [question] });
    assert.equal(json.choices[0]!.message.content, 'whole answers only');
    assert.equal(json.usage?.completion_tokens, 3);
    let streamed = '';
    for await (const chunk of await client.chat.completions.create({ model: 'svc-fast', messages: [question], stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? '';
    }
    assert.equal(streamed, 'whole answers only');
    const calls = await client.chat.completions.create({ model: 'svc-code', messages: [question], tools });
    assert.deepEqual(calls.choices[0]!.message.tool_calls, [{ id: 'call_fake_1', type: 'function', function: { name: 'get_weather', arguments: ARGUMENTS } }]);
  });
});
