// Chat completions through the official OpenAI client: responses, streaming framing, thinking on
// and off, tools, usage and timings. The default model has random weights, so the text is
// gibberish: these tests check structure, not wording. Parsing of real model output (reasoning,
// tool calls) is covered by the chat layer's unit tests and by test_server_chat_output.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, sseEvents, MODEL, TOOLS } from './helpers.mjs';

const oai = client();
const USER = [{ role: 'user', content: 'Say hello.' }];

function checkUsage(usage) {
  assert.ok(usage, 'usage present');
  assert.ok(usage.prompt_tokens > 0);
  assert.ok(usage.completion_tokens >= 0);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
  assert.equal(typeof usage.prompt_tokens_details.cached_tokens, 'number');
}

function checkTimings(t) {
  assert.ok(t, 'timings present');
  for (const k of ['prompt_n', 'prompt_ms', 'prompt_per_second', 'predicted_n', 'predicted_ms', 'predicted_per_second',
    'cache_n', 'passes', 'tokens_per_pass']) assert.equal(typeof t[k], 'number', `timings.${k}`);
}

test('non-streaming chat: message, finish_reason, usage, timings', async () => {
  const r = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.message.role, 'assistant');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.completion_tokens <= 12);
  if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
  checkUsage(r.usage);
  checkTimings(r.timings);
  assert.equal(r.timings.predicted_n, r.usage.completion_tokens);
});

test('thinking on (template default): the output is reasoning, with the `reasoning` alias', async () => {
  // The Qwen3.5 template opens <think> in the prompt; a random model never closes it, so
  // everything it writes is reasoning and content is empty.
  const r = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 16, temperature: 0 });
  const m = r.choices[0].message;
  if (m.reasoning_content) {
    assert.equal(m.reasoning, m.reasoning_content);
  }
  assert.ok((m.reasoning_content ?? '').length + (m.content ?? '').length > 0, 'some text came back');
});

test('thinking off (chat_template_kwargs and top-level enable_thinking): no reasoning, answer in content', async () => {
  for (const extra of [{ chat_template_kwargs: { enable_thinking: false } }, { enable_thinking: false }]) {
    const r = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 16, temperature: 0, ...extra });
    const m = r.choices[0].message;
    assert.ok(!m.reasoning_content, `no reasoning_content with ${JSON.stringify(extra)}`);
    assert.ok(!m.reasoning);
    assert.equal(typeof m.content, 'string');
    if (r.usage.completion_tokens > 0) assert.ok(m.content.length > 0 || r.choices[0].finish_reason === 'stop');
  }
  // And thinking on vs off renders different prompts.
  const on = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 1, temperature: 0 });
  const off = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 1, temperature: 0, enable_thinking: false });
  assert.notEqual(on.usage.prompt_tokens, off.usage.prompt_tokens);
});

test('streaming chat through the SDK: role first, deltas, finish chunk, usage chunk', async () => {
  const stream = await oai.chat.completions.create({
    model: MODEL, messages: USER, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const ch of stream) chunks.push(ch);
  assert.ok(chunks.length >= 3);
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: null });
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1, 'one id for the whole stream');
  for (const c of chunks) assert.equal(c.object, 'chat.completion.chunk');
  const usageChunk = chunks.at(-1);
  assert.deepEqual(usageChunk.choices, []);
  checkUsage(usageChunk.usage);
  const fin = chunks.at(-2);
  assert.ok(['stop', 'length'].includes(fin.choices[0].finish_reason));
  assert.deepEqual(fin.choices[0].delta, {});
  checkTimings(fin.timings);
  for (const c of chunks.slice(1, -2)) {
    assert.equal(c.choices[0].finish_reason, null);
    const d = c.choices[0].delta;
    const keys = Object.keys(d).filter((k) => k !== 'reasoning');
    assert.equal(keys.length, 1, `one kind of change per delta: ${JSON.stringify(d)}`);
    assert.ok(['content', 'reasoning_content', 'tool_calls'].includes(keys[0]));
  }
});

test('streaming equals non-streaming (greedy)', async () => {
  const body = { model: MODEL, messages: [{ role: 'user', content: 'Count to five.' }], max_tokens: 20, temperature: 0, enable_thinking: false };
  const whole = await oai.chat.completions.create(body);
  let content = '';
  for await (const ch of await oai.chat.completions.create({ ...body, stream: true })) {
    content += ch.choices[0]?.delta?.content ?? '';
  }
  assert.equal(content, whole.choices[0].message.content);
});

test('raw SSE framing: data lines, [DONE] last, no usage chunk unless asked', async () => {
  const { status, contentType, events } = await sseEvents('/v1/chat/completions', { model: MODEL, messages: USER, max_tokens: 5 });
  assert.equal(status, 200);
  assert.match(contentType, /text\/event-stream/);
  assert.equal(events.at(-1), '[DONE]');
  const parsed = events.slice(0, -1).map((e) => JSON.parse(e));
  assert.ok(parsed.every((p) => p.choices.length === 1), 'no usage chunk without include_usage');
  assert.notEqual(parsed.at(-1).choices[0].finish_reason, null);
});

test('max_tokens gives finish_reason length; seeds are honoured', async () => {
  const r = await oai.chat.completions.create({ model: MODEL, messages: USER, max_completion_tokens: 3, temperature: 0, ignore_eos: true });
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 3);
  const a = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 12, temperature: 1.0, seed: 7, enable_thinking: false });
  const b = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 12, temperature: 1.0, seed: 7, enable_thinking: false });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content, 'same seed, same text');
});

test('stop strings end the text before the stop string with finish_reason stop', async () => {
  const base = { model: MODEL, prompt: 'The quick brown fox', max_tokens: 24, temperature: 0, ignore_eos: true };
  const full = (await oai.completions.create(base)).choices[0].text;
  const k = [...full].findIndex((ch, idx) => idx >= 2 && /[a-z]/i.test(ch));
  if (k < 0) return; // no letter to stop on in this output
  const stop = [...full][k];
  const cut = await oai.completions.create({ ...base, stop: [stop] });
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.equal(cut.choices[0].text, full.slice(0, full.indexOf(stop)));
});

test('tools: request with tools renders and answers; tool-result round trip', async () => {
  const r = await oai.chat.completions.create({
    model: MODEL, messages: [{ role: 'user', content: 'Weather in Paris and the time in Rome?' }], tools: TOOLS,
    tool_choice: 'auto', parallel_tool_calls: true, max_tokens: 16, temperature: 0,
  });
  const c = r.choices[0];
  assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason));
  if (c.message.tool_calls) {
    for (const tc of c.message.tool_calls) {
      assert.ok(tc.id);
      assert.equal(tc.type, 'function');
      JSON.parse(tc.function.arguments);
    }
  }
  // The assistant's calls (arguments as JSON strings, as OpenAI sends them) and the results.
  const round = await oai.chat.completions.create({
    model: MODEL, tools: TOOLS, max_tokens: 8, temperature: 0,
    messages: [
      { role: 'user', content: 'Weather in Paris and the time in Rome?' },
      { role: 'assistant', content: null, tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":2}' } },
        { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '{"city":"Rome"}' } },
      ] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' },
      { role: 'tool', tool_call_id: 'call_2', content: '{"time": "12:00"}' },
    ],
  });
  assert.equal(round.choices[0].message.role, 'assistant');
  assert.ok(round.usage.prompt_tokens > r.usage.prompt_tokens, 'the tool results are in the prompt');
});

test('streaming with tools ends with a finish chunk and [DONE]', async () => {
  const { status, events } = await sseEvents('/v1/chat/completions', {
    model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], tools: TOOLS, max_tokens: 8,
  });
  assert.equal(status, 200);
  assert.equal(events.at(-1), '[DONE]');
  const fin = JSON.parse(events.at(-2));
  assert.ok(['stop', 'length', 'tool_calls'].includes(fin.choices[0].finish_reason));
});

test('each decoding mode (per request and streamed) answers with its timings', async () => {
  for (const mode of ['ar', 'diffusion', 'spec']) {
    const r = await oai.chat.completions.create({
      model: MODEL, messages: USER, max_tokens: 8, temperature: 0, clover: { mode, threshold: 0.9, block_size: 8 },
    });
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason), mode);
    checkUsage(r.usage);
    checkTimings(r.timings);
    if (mode === 'ar') assert.equal(r.timings.denoise_passes, undefined, 'ar: no denoising');
    else assert.ok(r.timings.denoise_passes > 0 && r.timings.blocks > 0 && r.timings.passes_per_block > 0, `${mode}: denoising timings`);
    let finish = null;
    for await (const ch of await oai.chat.completions.create({
      model: MODEL, messages: USER, max_tokens: 8, temperature: 0, stream: true, clover: { mode },
    })) finish = ch.choices[0]?.finish_reason ?? finish;
    assert.ok(['stop', 'length'].includes(finish), `${mode} streamed`);
  }
  // A mode the request names wrongly is a 400, not a silent fallback.
  await assert.rejects(oai.chat.completions.create({ model: MODEL, messages: USER, clover: { mode: 'turbo' } }), (e) => e.status === 400);
});

test('models list names the served model', async () => {
  const list = await oai.models.list();
  const ids = list.data.map((m) => m.id);
  assert.deepEqual(ids, [MODEL]);
  assert.equal(list.data[0].object, 'model');
});
