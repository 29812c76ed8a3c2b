// POST /v1/responses through the official `openai` npm client (responses.create, plain and
// streaming, and the SDK's own stream accumulator), with the default model (clover-tiny): reasoning
// items, output_text, the two parallel get_weather calls as function_call items and the answer to
// their function_call_output items, thinking off per request, and the refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, post, spawnServer, MODEL } from './helpers.mjs';

const oai = client();
const QUESTION = 'What is the capital of Australia? One word.';
const WARMER = 'Is it warmer in Lisbon or in Oslo?';
// The tool clover-tiny was trained with, as a Responses function tool.
const WEATHER = [{
  type: 'function', name: 'get_weather', description: 'Get the current weather in a city.',
  parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' } }, required: ['city'] },
}];

const texts = (r, type) => r.output.filter((o) => o.type === type);

test('responses.create: reasoning item, then a message with output_text; usage', async () => {
  const r = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 96, temperature: 0 });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, 'completed');
  assert.equal(r.model, MODEL);
  const [reasoning] = texts(r, 'reasoning');
  assert.ok(reasoning, 'thinking is on by default: a reasoning item');
  assert.match(reasoning.id, /^rs_/);
  assert.deepEqual(reasoning.summary, []);
  assert.equal(reasoning.content[0].type, 'reasoning_text');
  assert.ok(reasoning.content[0].text.length > 0);
  const [msg] = texts(r, 'message');
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.status, 'completed');
  assert.equal(msg.content[0].type, 'output_text');
  assert.equal(r.output_text, msg.content[0].text, 'the SDK reads the message text');
  assert.match(r.output_text, /Canberra/);
  assert.doesNotMatch(r.output_text, /<\/?think>/);
  assert.ok(r.output.indexOf(reasoning) < r.output.indexOf(msg), 'reasoning first');
  const u = r.usage;
  assert.ok(u.input_tokens > 0 && u.output_tokens > 0);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
  assert.equal(typeof u.input_tokens_details.cached_tokens, 'number');
  assert.ok(u.output_tokens_details.reasoning_tokens > 0 && u.output_tokens_details.reasoning_tokens < u.output_tokens);
});

test('reasoning.effort none turns thinking off: no reasoning item; instructions become the system turn', async () => {
  const r = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 32, temperature: 0, reasoning: { effort: 'none' } });
  assert.equal(texts(r, 'reasoning').length, 0);
  assert.match(r.output_text, /Canberra/);
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
  assert.equal(r.reasoning.effort, 'none');
  const withSystem = await oai.responses.create({
    model: MODEL, instructions: 'You are a helpful assistant.', input: QUESTION, max_output_tokens: 1, reasoning: { effort: 'none' },
  });
  assert.ok(withSystem.usage.input_tokens > r.usage.input_tokens, 'the instructions are in the prompt');
  assert.equal(withSystem.instructions, 'You are a helpful assistant.');
});

test('max_output_tokens cuts the output: status incomplete, reason max_output_tokens', async () => {
  const r = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 3, temperature: 0 });
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(r.usage.output_tokens, 3);
});

test('streaming: typed events in order, numbered, and the same output as without streaming', async () => {
  const body = { model: MODEL, input: QUESTION, max_output_tokens: 96, temperature: 0 };
  const whole = await oai.responses.create(body);
  const events = [];
  for await (const ev of await oai.responses.create({ ...body, stream: true })) events.push(ev);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[0].response.status, 'in_progress');
  assert.equal(events[1].type, 'response.in_progress');
  assert.equal(events.at(-1).type, 'response.completed');
  events.forEach((ev, i) => assert.equal(ev.sequence_number, i));
  const types = events.map((e) => e.type);
  for (const t of ['response.output_item.added', 'response.content_part.added', 'response.reasoning_text.delta',
    'response.reasoning_text.done', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
    'response.output_item.done']) assert.ok(types.includes(t), t);
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  const reasoning = events.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join('');
  const final = events.at(-1).response;
  assert.equal(text, texts(final, 'message')[0].content[0].text);
  assert.equal(reasoning, texts(final, 'reasoning')[0].content[0].text);
  assert.equal(text, whole.output_text, 'streaming equals non-streaming (greedy)');
  // Each item is added before its deltas and done after them, under the same output_index.
  for (const done of events.filter((e) => e.type === 'response.output_item.done')) {
    const added = events.findIndex((e) => e.type === 'response.output_item.added' && e.item.id === done.item.id);
    assert.ok(added >= 0 && added < events.indexOf(done));
    assert.equal(events[added].output_index, done.output_index);
    assert.deepEqual(final.output[done.output_index], done.item);
  }
  // The SDK's own accumulator (responses.stream) builds the same response.
  const stream = oai.responses.stream(body);
  const acc = await stream.finalResponse();
  assert.equal(texts(acc, 'message')[0].content[0].text, whole.output_text);
  assert.equal(texts(acc, 'reasoning')[0].content[0].text, texts(whole, 'reasoning')[0].content[0].text);
});

test('function tools: the two parallel get_weather calls, then the answer to their outputs', async () => {
  const r = await oai.responses.create({ model: MODEL, input: WARMER, tools: WEATHER, max_output_tokens: 160, temperature: 0 });
  assert.equal(r.status, 'completed');
  const calls = texts(r, 'function_call');
  assert.equal(calls.length, 2, JSON.stringify(r.output));
  for (const c of calls) {
    assert.match(c.id, /^fc_/);
    assert.match(c.call_id, /^call_/);
    assert.equal(c.name, 'get_weather');
    assert.equal(c.status, 'completed');
  }
  assert.deepEqual(calls.map((c) => JSON.parse(c.arguments)), [{ city: 'Lisbon' }, { city: 'Oslo' }]);
  assert.notEqual(calls[0].call_id, calls[1].call_id);
  assert.equal(texts(r, 'reasoning').length, 1, 'the thinking before the calls');

  // Turn 2: the whole output goes back as input, with one function_call_output per call.
  const temps = { Lisbon: 21, Oslo: 4 };
  const input = [
    { role: 'user', content: WARMER },
    ...r.output,
    ...calls.map((c) => {
      const city = JSON.parse(c.arguments).city;
      return { type: 'function_call_output', call_id: c.call_id, output: `{"city": "${city}", "temperature_c": ${temps[city]}}` };
    }),
  ];
  const answer = await oai.responses.create({ model: MODEL, input, tools: WEATHER, max_output_tokens: 160, temperature: 0 });
  assert.equal(texts(answer, 'function_call').length, 0, JSON.stringify(answer.output));
  assert.match(answer.output_text, /Lisbon/);
  assert.match(answer.output_text, /21/);
  assert.ok(answer.usage.input_tokens > r.usage.input_tokens, 'the calls and their outputs are in the prompt');
});

test('streaming function calls: arguments deltas add up to each call\'s arguments', async () => {
  const events = [];
  for await (const ev of await oai.responses.create({ model: MODEL, input: WARMER, tools: WEATHER, max_output_tokens: 160, temperature: 0, stream: true })) events.push(ev);
  const final = events.at(-1).response;
  const calls = texts(final, 'function_call');
  assert.equal(calls.length, 2);
  for (const c of calls) {
    const idx = final.output.indexOf(c);
    const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta' && e.output_index === idx).map((e) => e.delta).join('');
    assert.equal(deltas, c.arguments);
    const done = events.find((e) => e.type === 'response.function_call_arguments.done' && e.output_index === idx);
    assert.equal(done.arguments, c.arguments);
    assert.equal(done.name, 'get_weather');
  }
});

test('decoding modes per request through the clover extension', async () => {
  for (const mode of ['diffusion', 'spec']) {
    const r = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 96, temperature: 0, clover: { mode } });
    assert.match(r.output_text, /Canberra/, mode);
    assert.ok(r.timings.denoise_passes > 0, mode);
  }
});

test('logprobs: include message.output_text.logprobs gives the message text\'s tokens, plain and streamed', async () => {
  const body = { model: MODEL, input: QUESTION, max_output_tokens: 96, temperature: 0,
    include: ['message.output_text.logprobs'], top_logprobs: 2 };
  const r = await oai.responses.create(body);
  assert.equal(r.top_logprobs, 2);
  const part = texts(r, 'message')[0].content[0];
  assert.ok(part.logprobs.length > 0);
  for (const e of part.logprobs) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0 && Array.isArray(e.bytes));
    assert.equal(e.top_logprobs.length, 2);
    assert.equal(e.top_logprobs[0].token, e.token, 'greedy: the chosen token is the best alternative');
  }
  // The entries are the text's tokens (not the reasoning's: far fewer than the output tokens).
  assert.equal(part.logprobs.map((e) => e.token).join('').trim(), part.text.trim());
  assert.ok(part.logprobs.length < r.usage.output_tokens - r.usage.output_tokens_details.reasoning_tokens + 2);

  // Streamed: the deltas carry the same entries, and the done events repeat them whole.
  const stream = await oai.responses.create({ ...body, stream: true });
  const fromDeltas = [];
  let done = null;
  for await (const ev of stream) {
    if (ev.type === 'response.output_text.delta') fromDeltas.push(...ev.logprobs);
    if (ev.type === 'response.output_text.done') done = ev.logprobs;
  }
  assert.deepEqual(fromDeltas.map((e) => [e.token, e.logprob]), part.logprobs.map((e) => [e.token, e.logprob]));
  assert.deepEqual(done, fromDeltas);

  // Without the include or top_logprobs: none.
  const plain = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 96, temperature: 0 });
  assert.deepEqual(texts(plain, 'message')[0].content[0].logprobs, []);
});

test('refusals: previous_response_id, stateful and non-text inputs, other tool types, a bad field', async () => {
  const bad = async (body, re) => {
    const { status, json } = await post('/v1/responses', { model: MODEL, ...body });
    assert.equal(status, 400, JSON.stringify(body));
    assert.equal(json.error.type, 'invalid_request_error');
    assert.match(json.error.message, re);
  };
  await bad({ input: 'hi', previous_response_id: 'resp_123' }, /previous_response_id.*not supported/);
  await bad({}, /'input' is required/);
  await bad({ input: [{ type: 'item_reference', id: 'x' }] }, /keeps no state/);
  await bad({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, /input_image/);
  await bad({ input: 'hi', tools: [{ type: 'web_search' }], tool_choice: { type: 'web_search' } }, /tool_choice/);
  await bad({ input: 'hi', reasoning: { effort: 'extreme' } }, /reasoning.effort/);
  await bad({ input: 'hi', max_output_tokens: 0 }, /max_output_tokens/);
  await bad({ input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, /call_id/);
  await bad({ input: 'hi', text: { format: { type: 'json_schema', name: 'x', schema: {} } } }, /text.format/);
  await assert.rejects(oai.responses.create({ model: MODEL, input: 'hi', previous_response_id: 'resp_1' }), (e) => e.status === 400);
  // Tools the model cannot call (hosted ones, namespaces, as Codex sends) are not offered to it.
  const plain = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 1 });
  const hosted = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 1, tools: [{ type: 'web_search' }, { type: 'namespace', name: 'n', tools: [] }] });
  assert.equal(hosted.usage.input_tokens, plain.usage.input_tokens);
  // store is accepted and nothing is kept.
  const r = await oai.responses.create({ model: MODEL, input: QUESTION, max_output_tokens: 4, store: true });
  assert.equal(r.store, false);
});

test('thinking off server-wide (--chat-template-kwargs): no reasoning item unless the request asks for effort', async () => {
  const server = await spawnServer(['--chat-template-kwargs', '{"enable_thinking":false}', '-t', '1']);
  try {
    const own = client({ baseURL: `${server.base}/v1` });
    const off = await own.responses.create({ input: QUESTION, max_output_tokens: 32, temperature: 0 });
    assert.equal(texts(off, 'reasoning').length, 0);
    assert.match(off.output_text, /Canberra/);
    const on = await own.responses.create({ input: QUESTION, max_output_tokens: 96, temperature: 0, reasoning: { effort: 'medium' } });
    assert.equal(texts(on, 'reasoning').length, 1);
    assert.match(on.output_text, /Canberra/);
  } finally {
    server.proc.kill('SIGTERM');
  }
});
