// POST /v1/messages and /v1/messages/count_tokens through the official `@anthropic-ai/sdk` client
// (messages.create plain and streaming, and the SDK's stream accumulator), with the default model
// (clover-tiny): thinking and text blocks, the two parallel get_weather calls as tool_use blocks and
// the answer to their tool_results, stop reasons, thinking off per request, count_tokens,
// x-api-key, and errors in Anthropic's shape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { post, spawnServer, URL_BASE, API_KEY, MODEL } from './helpers.mjs';

const claude = new Anthropic({ baseURL: URL_BASE, apiKey: API_KEY || 'none', maxRetries: 0, timeout: 120_000 });
const QUESTION = [{ role: 'user', content: 'What is the capital of Australia? One word.' }];
const WARMER = [{ role: 'user', content: 'Is it warmer in Lisbon or in Oslo?' }];
// The tool clover-tiny was trained with, as an Anthropic tool.
const WEATHER = [{
  name: 'get_weather', description: 'Get the current weather in a city.',
  input_schema: { type: 'object', properties: { city: { type: 'string', description: 'City name' } }, required: ['city'] },
}];
const OFF = { thinking: { type: 'disabled' } };

const blocks = (m, type) => m.content.filter((b) => b.type === type);

test('messages.create: a thinking block, then the text; end_turn; usage', async () => {
  const m = await claude.messages.create({ model: MODEL, max_tokens: 96, temperature: 0, messages: QUESTION });
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.match(m.id, /^msg_/);
  assert.equal(m.model, MODEL);
  assert.deepEqual(m.content.map((b) => b.type), ['thinking', 'text']);
  assert.ok(m.content[0].thinking.length > 0);
  assert.equal(typeof m.content[0].signature, 'string');
  assert.match(m.content[1].text, /Canberra/);
  assert.doesNotMatch(m.content[1].text, /<\/?think>/);
  assert.equal(m.stop_reason, 'end_turn');
  assert.equal(m.stop_sequence, null);
  assert.ok(m.usage.input_tokens + m.usage.cache_read_input_tokens > 0);
  assert.ok(m.usage.output_tokens > 0);
});

test('thinking disabled: no thinking block; max_tokens and stop_sequences stop reasons', async () => {
  const m = await claude.messages.create({ model: MODEL, max_tokens: 32, temperature: 0, messages: QUESTION, ...OFF });
  assert.deepEqual(m.content.map((b) => b.type), ['text']);
  assert.match(m.content[0].text, /Canberra/);
  const cut = await claude.messages.create({ model: MODEL, max_tokens: 1, temperature: 0, messages: QUESTION, ...OFF });
  assert.equal(cut.stop_reason, 'max_tokens');
  assert.equal(cut.usage.output_tokens, 1);
  const stopped = await claude.messages.create({ model: MODEL, max_tokens: 32, temperature: 0, messages: QUESTION, ...OFF, stop_sequences: ['berra'] });
  assert.equal(stopped.stop_reason, 'stop_sequence');
  assert.equal(stopped.stop_sequence, 'berra');
  assert.equal(stopped.content[0].text, m.content[0].text.slice(0, m.content[0].text.indexOf('berra')));
});

test('streaming: message_start, ping, block events, message_delta, message_stop; same as without streaming', async () => {
  const body = { model: MODEL, max_tokens: 96, temperature: 0, messages: QUESTION };
  const whole = await claude.messages.create(body);
  const events = [];
  for await (const ev of await claude.messages.create({ ...body, stream: true })) events.push(ev);
  assert.equal(events[0].type, 'message_start');
  assert.deepEqual(events[0].message.content, []);
  assert.equal(events.at(-2).type, 'message_delta');
  assert.equal(events.at(-2).delta.stop_reason, 'end_turn');
  assert.ok(events.at(-2).usage.output_tokens > 0);
  assert.equal(events.at(-1).type, 'message_stop');
  const starts = events.filter((e) => e.type === 'content_block_start');
  assert.deepEqual(starts.map((e) => [e.index, e.content_block.type]), [[0, 'thinking'], [1, 'text']]);
  const thinking = events.filter((e) => e.type === 'content_block_delta' && e.delta.type === 'thinking_delta').map((e) => e.delta.thinking).join('');
  const text = events.filter((e) => e.type === 'content_block_delta' && e.delta.type === 'text_delta').map((e) => e.delta.text).join('');
  assert.equal(thinking, whole.content[0].thinking);
  assert.equal(text, whole.content[1].text);
  assert.equal(events.filter((e) => e.type === 'content_block_stop').length, 2);
  // The raw stream has an `event:` line per event, and a ping.
  const res = await fetch(`${URL_BASE}/v1/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': API_KEY, 'anthropic-version': '2023-06-01' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const raw = (await res.text()).split('\n\n').filter((b) => b && !b.startsWith(':'));
  for (const b of raw) assert.match(b, /^event: (\w+)\ndata: \{"type":"\1"/);
  assert.match(raw[1], /^event: ping/);
  // The SDK's accumulator (messages.stream) builds the same message.
  const acc = await claude.messages.stream(body).finalMessage();
  assert.deepEqual(acc.content, whole.content);
});

test('tool use: two tool_use blocks, then the answer to the tool_results', async () => {
  const m = await claude.messages.create({ model: MODEL, max_tokens: 160, temperature: 0, messages: WARMER, tools: WEATHER });
  assert.equal(m.stop_reason, 'tool_use');
  const uses = blocks(m, 'tool_use');
  assert.equal(uses.length, 2, JSON.stringify(m.content));
  assert.deepEqual(uses.map((u) => u.input), [{ city: 'Lisbon' }, { city: 'Oslo' }]);
  for (const u of uses) {
    assert.match(u.id, /^toolu_/);
    assert.equal(u.name, 'get_weather');
  }
  const temps = { Lisbon: 21, Oslo: 4 };
  const answer = await claude.messages.create({
    model: MODEL, max_tokens: 160, temperature: 0, tools: WEATHER,
    messages: [...WARMER, { role: 'assistant', content: m.content }, {
      role: 'user',
      content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: `{"city": "${u.input.city}", "temperature_c": ${temps[u.input.city]}}` })),
    }],
  });
  assert.equal(answer.stop_reason, 'end_turn', JSON.stringify(answer.content));
  assert.equal(blocks(answer, 'tool_use').length, 0);
  assert.match(blocks(answer, 'text')[0].text, /Lisbon/);
  assert.match(blocks(answer, 'text')[0].text, /21/);
});

test('streaming tool use: input_json_delta fragments add up to each input', async () => {
  const body = { model: MODEL, max_tokens: 160, temperature: 0, messages: WARMER, tools: WEATHER };
  const events = [];
  for await (const ev of await claude.messages.create({ ...body, stream: true })) events.push(ev);
  const uses = events.filter((e) => e.type === 'content_block_start' && e.content_block.type === 'tool_use');
  assert.equal(uses.length, 2);
  for (const u of uses) {
    const json = events.filter((e) => e.type === 'content_block_delta' && e.index === u.index).map((e) => e.delta.partial_json).join('');
    assert.ok(['Lisbon', 'Oslo'].includes(JSON.parse(json).city));
  }
  assert.equal(events.at(-2).delta.stop_reason, 'tool_use');
  const acc = await claude.messages.stream(body).finalMessage();
  assert.deepEqual(blocks(acc, 'tool_use').map((u) => u.input), [{ city: 'Lisbon' }, { city: 'Oslo' }]);
});

test('system messages between the turns (as Claude Code sends them) join the system prompt', async () => {
  const a = await claude.messages.countTokens({ model: MODEL, system: 'Be brief.\n\nAnswer in English.', messages: QUESTION });
  const b = await claude.messages.countTokens({
    model: MODEL, system: 'Be brief.', messages: [...QUESTION, { role: 'system', content: 'Answer in English.' }],
  });
  assert.equal(b.input_tokens, a.input_tokens);
});

test('count_tokens equals the prompt of the same request', async () => {
  const body = { model: MODEL, messages: WARMER, tools: WEATHER, system: 'Be brief.' };
  const { input_tokens } = await claude.messages.countTokens(body);
  const m = await claude.messages.create({ ...body, max_tokens: 1 });
  assert.equal(input_tokens, m.usage.input_tokens + m.usage.cache_read_input_tokens);
  const off = await claude.messages.countTokens({ ...body, ...OFF });
  assert.notEqual(off.input_tokens, input_tokens, 'thinking off renders another prompt');
});

test('errors in Anthropic\'s shape; x-api-key and Bearer both authenticate', async () => {
  const check = (r, status, type, re) => {
    assert.equal(r.status, status, r.text);
    assert.equal(r.json.type, 'error');
    assert.equal(r.json.error.type, type);
    if (re) assert.match(r.json.error.message, re);
  };
  check(await post('/v1/messages', { model: MODEL, messages: QUESTION }), 400, 'invalid_request_error', /max_tokens/);
  check(await post('/v1/messages', { model: MODEL, max_tokens: 8, messages: [{ role: 'tool', content: 'x' }] }), 400, 'invalid_request_error', /role/);
  check(await post('/v1/messages', { model: MODEL, max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }),
    400, 'invalid_request_error', /image/);
  check(await post('/v1/messages', { model: MODEL, max_tokens: 8, messages: QUESTION, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }),
    400, 'invalid_request_error', /not supported/);
  check(await post('/v1/messages', { model: MODEL, max_tokens: 8, messages: QUESTION, thinking: { type: 'sometimes' } }), 400, 'invalid_request_error', /thinking.type/);
  check(await post('/v1/messages', { model: 'no-such-model', max_tokens: 8, messages: QUESTION }), 404, 'not_found_error');
  check(await post('/v1/messages', 'not json'), 400, 'invalid_request_error');
  check(await post('/v1/messages', { model: MODEL, max_tokens: 8, messages: QUESTION }, { key: '' }), 401, 'authentication_error');
  check(await post('/v1/messages', { model: MODEL, max_tokens: 8, messages: QUESTION }, { key: '', headers: { 'x-api-key': 'wrong' } }), 401, 'authentication_error');
  check(await post('/v1/messages/count_tokens', { model: MODEL }, {}), 400, 'invalid_request_error', /messages/);
  const ok = await post('/v1/messages', { model: MODEL, max_tokens: 1, messages: QUESTION }, { key: '', headers: { 'x-api-key': API_KEY } });
  assert.equal(ok.status, 200);
  await assert.rejects(claude.messages.create({ model: MODEL, messages: QUESTION }), (e) => e.status === 400 && e.error?.error?.type === 'invalid_request_error');
});

test('thinking off server-wide (--chat-template-kwargs): no thinking block unless the request enables it', async () => {
  const server = await spawnServer(['--chat-template-kwargs', '{"enable_thinking":false}', '-t', '1']);
  try {
    const own = new Anthropic({ baseURL: server.base, apiKey: 'none', maxRetries: 0 });
    const off = await own.messages.create({ model: 'default', max_tokens: 32, temperature: 0, messages: QUESTION });
    assert.deepEqual(off.content.map((b) => b.type), ['text']);
    assert.match(off.content[0].text, /Canberra/);
    const on = await own.messages.create({
      model: 'default', max_tokens: 96, temperature: 0, messages: QUESTION, thinking: { type: 'enabled', budget_tokens: 1024 },
    });
    assert.deepEqual(on.content.map((b) => b.type), ['thinking', 'text']);
  } finally {
    server.proc.kill('SIGTERM');
  }
});
