// Every bad input gets OpenAI's error shape with the right status; never a 500, never a hang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, post, get, spawnServer, MODEL, URL_BASE } from './helpers.mjs';

function checkError(r, status, type, pattern) {
  assert.equal(r.status, status, `status (body: ${r.text})`);
  assert.ok(r.json?.error, `OpenAI error shape: ${r.text}`);
  assert.equal(r.json.error.code, status);
  assert.equal(r.json.error.type, type);
  assert.equal(typeof r.json.error.message, 'string');
  if (pattern) assert.match(r.json.error.message, pattern);
}

const CHAT = '/v1/chat/completions';
const USER = [{ role: 'user', content: 'hi' }];

test('malformed JSON and non-object bodies: 400', async () => {
  checkError(await post(CHAT, '{"messages": [', {}), 400, 'invalid_request_error', /not valid JSON/);
  checkError(await post(CHAT, '[1,2]'), 400, 'invalid_request_error', /JSON object/);
  checkError(await post(CHAT, ''), 400, 'invalid_request_error');
  checkError(await post('/v1/completions', 'nope'), 400, 'invalid_request_error');
});

test('wrong field types and values: 400 naming the field', async () => {
  const cases = [
    [{ messages: 'hi' }, /messages/],
    [{}, /messages/],
    [{ messages: [] }, /messages/],
    [{ messages: [{ content: 'x' }] }, /role/],
    [{ messages: USER, temperature: 'hot' }, /temperature/],
    [{ messages: USER, temperature: -1 }, /temperature/],
    [{ messages: USER, max_tokens: 1.5 }, /max_tokens/],
    [{ messages: USER, max_tokens: '10' }, /max_tokens/],
    [{ messages: USER, stream: 'yes' }, /stream/],
    [{ messages: USER, stop: 5 }, /stop/],
    [{ messages: USER, top_k: -3 }, /top_k/],
    [{ messages: USER, seed: 'x' }, /seed/],
    [{ messages: USER, n: 2 }, /n = 1/],
    [{ messages: USER, tools: {} }, /tools/],
    [{ messages: USER, tools: [{ type: 'function' }] }, /function/],
    [{ messages: USER, tool_choice: 'sometimes' }, /tool_choice/],
    [{ messages: USER, chat_template_kwargs: [] }, /chat_template_kwargs/],
    [{ messages: USER, chat_template_kwargs: { enable_thinking: 'no' } }, /enable_thinking/],
    [{ messages: USER, clover: { mode: 'fast' } }, /clover.mode/],
    [{ messages: USER, clover: { threshold: 2 } }, /threshold/],
    [{ messages: USER, stream_options: { include_usage: 1 } }, /include_usage/],
  ];
  for (const [body, pattern] of cases) {
    checkError(await post(CHAT, { model: MODEL, ...body }), 400, 'invalid_request_error', pattern);
  }
  checkError(await post('/v1/completions', { prompt: 5 }), 400, 'invalid_request_error', /prompt/);
  checkError(await post('/v1/completions', { prompt: [1, 99999999] }), 400, 'invalid_request_error', /out of range/);
  checkError(await post('/detokenize', { tokens: ['a'] }), 400, 'invalid_request_error', /tokens/);
  checkError(await post('/tokenize', { content: 3 }), 400, 'invalid_request_error', /content/);
});

test('hostile nesting: 400, and the server survives', async () => {
  const deep = `{"messages":[{"role":"user","content":${'['.repeat(100000)}${']'.repeat(100000)}}]}`;
  checkError(await post(CHAT, deep), 400, 'invalid_request_error', /nests deeper/);
  const args = '{"a":'.repeat(50000) + '1' + '}'.repeat(50000);
  checkError(await post(CHAT, { model: MODEL, messages: [
    USER[0], { role: 'assistant', content: '', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: args } }] },
    { role: 'user', content: 'again' }] }), 400, 'invalid_request_error', /arguments nests deeper/);
  assert.equal((await get('/health')).status, 200);
});

test('unknown model: 404 through the SDK', async () => {
  await assert.rejects(
    client().chat.completions.create({ model: 'gpt-4o', messages: USER, max_tokens: 1 }),
    (e) => e.status === 404 && /gpt-4o/.test(e.error?.message ?? e.message));
});

test('prompt longer than the context: 400 with both numbers', async () => {
  const long = 'lorem ipsum dolor sit amet '.repeat(3000);
  const r = await post(CHAT, { model: MODEL, messages: [{ role: 'user', content: long }], max_tokens: 4 });
  checkError(r, 400, 'exceed_context_size_error', /context/);
  assert.ok(r.json.error.n_prompt_tokens > r.json.error.n_ctx);
  assert.equal(r.json.error.n_ctx, 4096);
  assert.match(r.json.error.message, new RegExp(String(r.json.error.n_prompt_tokens)));
  assert.match(r.json.error.message, /4096/);
  // Streaming requests get the same plain JSON error, not a broken stream.
  const s = await post(CHAT, { model: MODEL, messages: [{ role: 'user', content: long }], stream: true });
  checkError(s, 400, 'exceed_context_size_error');
});

test('template errors: 400 with the template\'s message', async () => {
  checkError(await post(CHAT, { model: MODEL, messages: [{ role: 'system', content: 'only a system prompt' }] }),
    400, 'invalid_request_error', /No user query found/);
  checkError(await post(CHAT, { model: MODEL, messages: [...USER, { role: 'system', content: 'late' }] }),
    400, 'invalid_request_error', /System message must be at the beginning/);
  checkError(await post(CHAT, { model: MODEL, messages: [{ role: 'wizard', content: 'x' }, ...USER] }),
    400, 'invalid_request_error', /Unexpected message role/);
});

test('API key: missing or wrong -> 401; /health needs none', async () => {
  checkError(await post(CHAT, { model: MODEL, messages: USER }, { key: '' }), 401, 'authentication_error', /missing/i);
  checkError(await post(CHAT, { model: MODEL, messages: USER }, { key: 'wrong' }), 401, 'authentication_error', /invalid/i);
  checkError(await get('/v1/models', { key: 'wrong' }), 401, 'authentication_error');
  const bad = new OpenAI({ baseURL: `${URL_BASE}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: MODEL, messages: USER }), (e) => e.status === 401);
  assert.equal((await get('/health', { key: '' })).status, 200);
});

test('unknown endpoint: 404 in the error shape', async () => {
  checkError(await get('/v1/nothing'), 404, 'not_found_error');
});

test('overload: a full queue answers 503 (own server: 1 slot, queue of 1)', async (t) => {
  const bin = process.env.CLOVER_BIN;
  if (!bin) return t.skip('CLOVER_BIN not set');
  const { base, proc } = await spawnServer(['--parallel', '1', '--max-queue', '1', '-t', '1']);
  try {
    const body = JSON.stringify({ prompt: 'once upon a time', max_tokens: 4000, ignore_eos: true, temperature: 0 });
    const send = () => fetch(`${base}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const results = await Promise.all(Array.from({ length: 6 }, send));
    const statuses = results.map((r) => r.status);
    assert.ok(statuses.includes(503), `some requests were refused: ${statuses}`);
    assert.ok(statuses.includes(200), `some were served: ${statuses}`);
    const bodies = await Promise.all(results.map((r) => r.text()));
    const err = JSON.parse(bodies[statuses.indexOf(503)]);
    assert.equal(err.error.type, 'unavailable_error');
    assert.match(err.error.message, /busy/);
  } finally {
    proc.kill('SIGTERM');
  }
});
