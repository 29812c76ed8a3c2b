// llama-server's endpoints and the thinking budget (issue 24): GET /props, GET /slots (and
// --no-slots), POST /apply-template, CORS (origin reflected, OPTIONS preflight without a key), and
// --reasoning-budget / reasoning_budget / thinking_budget_tokens, with the thinking tokens counted
// from the returned token ids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { post, get, spawnServer, URL_BASE, API_KEY, MODEL, sleep } from './helpers.mjs';

const CHAT = '/v1/chat/completions';
const HI = [{ role: 'user', content: 'hi' }];
const ESSAY = [{ role: 'user', content: 'Write a long essay about drones.' }];
const DRONES = [{ role: 'user', content: 'Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4. Reply with the JSON list of orders.' }];

async function call(base, path, body, key = '') {
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'Content-Type': 'application/json', ...(key ? { Authorization: `Bearer ${key}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, json, text };
}

test('GET /props: llama-server\'s shape', async () => {
  const r = await get('/props');
  assert.equal(r.status, 200, r.text);
  const p = r.json;
  assert.equal(p.total_slots, 4);
  assert.equal(p.model_alias, MODEL);
  assert.equal(p.model_path, process.env.CLOVER_MODEL_PATH);
  assert.deepEqual(p.modalities, { vision: false, audio: false });
  assert.match(p.chat_template, /<\|im_start\|>/);
  assert.equal(typeof p.build_info, 'string');
  assert.equal(p.endpoint_slots, true);
  assert.equal(p.endpoint_metrics, true);
  const d = p.default_generation_settings;
  assert.equal(d.n_ctx, 4096);
  for (const k of ['n_predict', 'seed', 'temperature', 'top_k', 'top_p', 'min_p', 'presence_penalty', 'frequency_penalty',
    'repeat_penalty', 'repeat_last_n', 'reasoning_budget']) assert.equal(typeof d.params[k], 'number', k);
  assert.equal(d.params.reasoning_format, 'deepseek');
  assert.equal((await get('/props', { key: '' })).status, 401, 'the key is required');
});

test('GET /slots: one entry per slot, the busy one processing; --no-slots answers 501', async () => {
  const idle = await get('/slots');
  assert.equal(idle.status, 200, idle.text);
  assert.deepEqual(idle.json.map((s) => s.id), [0, 1, 2, 3]);
  for (const s of idle.json) {
    assert.equal(s.is_processing, false);
    assert.equal(s.id_task, -1);
    assert.equal(s.n_ctx, 4096);
    assert.equal(typeof s.params.temperature, 'number');
    assert.equal(s.next_token.n_decoded, 0);
  }
  // A long streaming generation keeps one slot busy while /slots is read.
  const ctl = new AbortController();
  const res = await fetch(`${URL_BASE}${CHAT}`, {
    method: 'POST', signal: ctl.signal,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ messages: ESSAY, max_tokens: 3000, ignore_eos: true, stream: true, temperature: 1, seed: 3 }),
  });
  const reader = res.body.getReader();
  await reader.read();
  let busy = null;
  for (let i = 0; i < 100 && !busy; i++) {
    busy = (await get('/slots')).json.find((s) => s.is_processing && s.next_token.n_decoded > 0);
    if (!busy) await sleep(20);
  }
  ctl.abort();
  assert.ok(busy, 'a slot is processing');
  assert.ok(busy.id_task >= 0);
  assert.equal(busy.params.n_predict, 3000);
  assert.equal(busy.params.seed, 3);
  assert.ok(busy.n_prompt_tokens > 0);

  const off = await spawnServer(['--no-slots']);
  try {
    const r = await call(off.base, '/slots');
    assert.equal(r.status, 501);
    assert.match(r.json.error.message, /--slots/);
    assert.equal((await call(off.base, '/props')).json.endpoint_slots, false);
  } finally {
    off.proc.kill('SIGTERM');
  }
  const one = await spawnServer(['--parallel', '1']);
  try {
    const ctl1 = new AbortController();
    const r1 = await fetch(`${one.base}${CHAT}`, {
      method: 'POST', signal: ctl1.signal, headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: ESSAY, max_tokens: 3000, ignore_eos: true, stream: true }),
    });
    await r1.body.getReader().read();
    assert.equal((await call(one.base, '/slots?fail_on_no_slot=1')).status, 503);
    assert.equal((await call(one.base, '/slots')).status, 200);
    ctl1.abort();
  } finally {
    one.proc.kill('SIGTERM');
  }
});

test('POST /apply-template: the rendered prompt', async () => {
  const r = await post('/apply-template', { messages: HI });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.prompt, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n');
  const off = await post('/apply-template', { messages: HI, chat_template_kwargs: { enable_thinking: false } });
  assert.equal(off.json.prompt, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  const bad = await post('/apply-template', { messages: [] });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /messages/);
  assert.equal((await post('/apply-template', { messages: HI }, { key: '' })).status, 401);
});

test('CORS: the origin is reflected; a preflight needs no key', async () => {
  const origin = 'http://localhost:5173';
  const pre = await fetch(`${URL_BASE}${CHAT}`, {
    method: 'OPTIONS',
    headers: { Origin: origin, 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization, content-type' },
  });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), origin);
  assert.equal(pre.headers.get('access-control-allow-credentials'), 'true');
  assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
  assert.match(pre.headers.get('access-control-allow-headers'), /authorization/);
  // Answers, errors and streams all carry it.
  const ok = await fetch(`${URL_BASE}/v1/models`, { headers: { Origin: origin, Authorization: `Bearer ${API_KEY}` } });
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get('access-control-allow-origin'), origin);
  const denied = await fetch(`${URL_BASE}/v1/models`, { headers: { Origin: origin } });
  assert.equal(denied.status, 401);
  assert.equal(denied.headers.get('access-control-allow-origin'), origin);
  const stream = await fetch(`${URL_BASE}${CHAT}`, {
    method: 'POST',
    headers: { Origin: origin, 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ messages: HI, max_tokens: 4, stream: true }),
  });
  assert.equal(stream.headers.get('access-control-allow-origin'), origin);
  await stream.text();
  const plain = await fetch(`${URL_BASE}/health`);
  assert.equal(plain.headers.get('access-control-allow-origin'), null, 'no Origin, no CORS headers');
});

// ---- the thinking budget -----------------------------------------------------------------------

const tokenize = async (content) => (await post('/tokenize', { content, parse_special: true })).json.tokens;
// Hot sampling keeps the tiny model thinking (its own think notes are under 12 tokens); the end
// token is ignored so only </think> ends the block.
const HOT = { messages: ESSAY, temperature: 4, top_k: 0, top_p: 1, min_p: 0, ignore_eos: true, max_tokens: 40, return_tokens: true };

async function chat(body, base = URL_BASE, key = API_KEY) {
  const r = await call(base, CHAT, body, key);
  assert.equal(r.status, 200, r.text);
  return r.json;
}

// A seed whose unbounded thinking runs past 20 tokens (checked, not assumed).
async function longThinkingSeed(closeId) {
  for (let seed = 1; seed <= 40; seed++) {
    const r = await chat({ ...HOT, seed });
    const idx = r.choices[0].tokens.indexOf(closeId);
    if ((idx === -1 || idx > 20) && r.usage.completion_tokens_details.reasoning_tokens > 20) return { seed, r };
  }
  throw new Error('no seed among 1..40 thinks for more than 20 tokens');
}

test('reasoning budget per request: 16 thinking tokens, then the forced </think>; 0 closes at once', async () => {
  const [closeId] = await tokenize('</think>');
  assert.equal((await tokenize('</think>')).length, 1);
  const forced = await tokenize('\n</think>\n\n');
  const { seed, r: free } = await longThinkingSeed(closeId);
  const freeTokens = free.choices[0].tokens;

  for (const field of ['reasoning_budget', 'thinking_budget_tokens']) {
    const r = await chat({ ...HOT, seed, [field]: 16 });
    const t = r.choices[0].tokens;
    // The model's own first 16 tokens (the same seed), then the closing text, then the answer.
    assert.deepEqual(t.slice(0, 16), freeTokens.slice(0, 16), field);
    assert.deepEqual(t.slice(16, 16 + forced.length), forced, field);
    assert.equal(t.indexOf(closeId), 16 + forced.indexOf(closeId), 'exactly 16 thinking tokens before </think>');
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 16);
    assert.equal(r.usage.completion_tokens, t.length);
    assert.ok(t.length <= 40, 'max_tokens counts the forced tokens too');
    assert.ok(r.choices[0].message.content.length > 0, 'the answer follows');
  }
  const zero = await chat({ ...HOT, seed, reasoning_budget: 0 });
  assert.deepEqual(zero.choices[0].tokens.slice(0, forced.length), forced);
  assert.equal(zero.usage.completion_tokens_details.reasoning_tokens, 0);
  assert.ok(!zero.choices[0].message.reasoning_content);
  // -1: unlimited, as without the field.
  assert.deepEqual((await chat({ ...HOT, seed, reasoning_budget: -1 })).choices[0].tokens, freeTokens);
  for (const bad of [-2, 1.5, 'x']) {
    const e = await post(CHAT, { ...HOT, reasoning_budget: bad });
    assert.equal(e.status, 400);
    assert.match(e.json.error.message, /reasoning_budget/);
  }

  // Streaming gives the same reasoning and answer.
  const res = await fetch(`${URL_BASE}${CHAT}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ ...HOT, seed, reasoning_budget: 16, stream: true }),
  });
  let reasoning = '', content = '';
  for (const block of (await res.text()).split('\n\n')) {
    if (!block.startsWith('data: {')) continue;
    const d = JSON.parse(block.slice(6)).choices[0]?.delta ?? {};
    reasoning += d.reasoning_content ?? '';
    content += d.content ?? '';
  }
  const whole = await chat({ ...HOT, seed, reasoning_budget: 16 });
  assert.equal(reasoning, whole.choices[0].message.reasoning_content ?? '');
  assert.equal(content, whole.choices[0].message.content);
});

test('--reasoning-budget 16 / 0 server-wide, with --reasoning-budget-message', async () => {
  const [closeId] = await tokenize('</think>');
  const { seed, r: free } = await longThinkingSeed(closeId);
  const srv = await spawnServer(['--reasoning-budget', '16', '--reasoning-budget-message', ' Enough thinking.', '-t', '1']);
  try {
    assert.equal((await call(srv.base, '/props')).json.default_generation_settings.params.reasoning_budget, 16);
    const forced = await tokenize(' Enough thinking.\n</think>\n\n');
    const r = await chat({ ...HOT, seed }, srv.base, '');
    const t = r.choices[0].tokens;
    assert.deepEqual(t.slice(0, 16), free.choices[0].tokens.slice(0, 16));
    assert.deepEqual(t.slice(16, 16 + forced.length), forced);
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 16);
    assert.match(r.choices[0].message.reasoning_content, /Enough thinking\.$/);
    // A request's own budget beats the server's.
    assert.deepEqual((await chat({ ...HOT, seed, reasoning_budget: -1 }, srv.base, '')).choices[0].tokens, free.choices[0].tokens);
  } finally {
    srv.proc.kill('SIGTERM');
  }
  const zero = await spawnServer(['--reasoning-budget', '0', '-t', '1']);
  try {
    const forced = await tokenize('\n</think>\n\n');
    const r = await chat({ messages: DRONES, temperature: 0, max_tokens: 80, return_tokens: true }, zero.base, '');
    assert.deepEqual(r.choices[0].tokens.slice(0, forced.length), forced);
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 0);
    assert.ok(!r.choices[0].message.reasoning_content);
    assert.match(r.choices[0].message.content, /D-07/, 'the model answers after the closed think block');
  } finally {
    zero.proc.kill('SIGTERM');
  }
});
