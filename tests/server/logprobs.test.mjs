// OpenAI logprobs (chat: logprobs + top_logprobs; completions: logprobs N) and logit_bias, through
// the official client where it has the fields and raw HTTP for the refusals. The default model has
// random weights: these tests check shapes and the relations that must hold (greedy picks the
// top-1 alternative; a -100 bias removes the greedy token; +100 forces one), not wording.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, post, MODEL } from './helpers.mjs';

const oai = client();
const USER = [{ role: 'user', content: 'Count to ten.' }];

function checkEntry(e, k) {
  assert.equal(typeof e.token, 'string');
  assert.ok(Number.isFinite(e.logprob) && e.logprob <= 0, `logprob ${e.logprob}`);
  assert.ok(Math.exp(e.logprob) <= 1);
  assert.ok(Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256));
  const decoded = Buffer.from(e.bytes).toString('utf8');
  if (!decoded.includes('\uFFFD')) assert.equal(decoded, e.token);
  if (k === undefined) return;
  assert.equal(e.top_logprobs.length, k);
  for (let i = 1; i < k; ++i) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob, 'best first');
  for (const t of e.top_logprobs) checkEntry(t);
  // Greedy: the chosen token is the most likely one, with the same log-probability.
  assert.equal(e.token, e.top_logprobs[0].token);
  assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-9);
}

test('chat logprobs: one entry per generated token, greedy token is the top-1 alternative', async () => {
  const r = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 8, temperature: 0,
    logprobs: true, top_logprobs: 3 });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const e of content) checkEntry(e, 3);

  // Without top_logprobs: the entries, no alternatives. Without logprobs: null.
  const plain = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 8, temperature: 0, logprobs: true });
  assert.deepEqual(plain.choices[0].logprobs.content.map((e) => e.token), content.map((e) => e.token));
  for (const e of plain.choices[0].logprobs.content) assert.deepEqual(e.top_logprobs, []);
  const none = await oai.chat.completions.create({ model: MODEL, messages: USER, max_tokens: 2, temperature: 0 });
  assert.equal(none.choices[0].logprobs, null);
});

test('chat logprobs stream: the chunks carry the same entries as the whole answer', async () => {
  const body = { model: MODEL, messages: USER, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 };
  const whole = await oai.chat.completions.create(body);
  const stream = await oai.chat.completions.create({ ...body, stream: true });
  const entries = [];
  for await (const chunk of stream) {
    const lp = chunk.choices[0]?.logprobs;
    if (lp) entries.push(...lp.content);
  }
  const expected = whole.choices[0].logprobs.content;
  assert.equal(entries.length, expected.length);
  for (let i = 0; i < entries.length; ++i) {
    checkEntry(entries[i], 2);
    assert.equal(entries[i].token, expected[i].token);
    assert.ok(Math.abs(entries[i].logprob - expected[i].logprob) < 1e-9);
  }
});

test('completions logprobs: tokens, token_logprobs, top_logprobs, text_offset', async () => {
  const r = await oai.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0,
    logprobs: 2, return_tokens: true });
  const lp = r.choices[0].logprobs;
  const n = r.usage.completion_tokens;
  assert.equal(lp.tokens.length, n);
  assert.equal(lp.token_logprobs.length, n);
  assert.equal(lp.top_logprobs.length, n);
  assert.equal(lp.text_offset.length, n);
  for (let i = 0; i < n; ++i) {
    assert.ok(lp.token_logprobs[i] <= 0);
    const alts = Object.entries(lp.top_logprobs[i]);
    assert.ok(alts.length >= 1 && alts.length <= 2);
    assert.equal(lp.top_logprobs[i][lp.tokens[i]], lp.token_logprobs[i], 'greedy token is among its alternatives');
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
  assert.equal(lp.text_offset[0], 0);

  // Streaming: the chunks' lists concatenate to the same ones.
  const stream = await oai.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0,
    logprobs: 2, stream: true });
  const tokens = [], offsets = [];
  for await (const chunk of stream) {
    const l = chunk.choices[0]?.logprobs;
    if (l) { tokens.push(...l.tokens); offsets.push(...l.text_offset); }
  }
  assert.deepEqual(tokens, lp.tokens);
  assert.deepEqual(offsets, lp.text_offset);
});

test('logprobs in diffusion and spec modes: an entry per token, from the row that chose it', async () => {
  const body = { model: MODEL, messages: USER, max_tokens: 40, temperature: 0, logprobs: true, top_logprobs: 2 };
  const ar = (await oai.chat.completions.create(body)).choices[0].logprobs.content;
  for (const mode of ['diffusion', 'spec']) {
    const r = await oai.chat.completions.create({ ...body, clover: { mode } });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens, mode);
    for (const e of content) checkEntry(e, 2);
    if (mode === 'spec') {
      // Guess-then-verify is AR's answer, each token judged by a causal row as in AR.
      assert.deepEqual(content.map((e) => e.token), ar.map((e) => e.token));
      for (let i = 0; i < ar.length; ++i) assert.ok(Math.abs(content[i].logprob - ar[i].logprob) < 1e-3, `token ${i}`);
    }
    // Streamed: the same entries.
    const stream = await oai.chat.completions.create({ ...body, clover: { mode }, stream: true });
    const streamed = [];
    for await (const chunk of stream) if (chunk.choices[0]?.logprobs) streamed.push(...chunk.choices[0].logprobs.content);
    assert.deepEqual(streamed.map((e) => e.token), content.map((e) => e.token), mode);
  }
});

test('logit_bias: -100 removes the greedy token, +100 forces a token', async () => {
  const first = async (bias) => {
    const r = await post('/v1/completions', { model: MODEL, prompt: 'Once upon a time', max_tokens: 1, temperature: 0,
      ignore_eos: true, return_tokens: true, ...(bias ? { logit_bias: bias } : {}) });
    assert.equal(r.status, 200, r.text);
    return r.json.choices[0].tokens[0];
  };
  const greedy = await first();
  const banned = await first({ [greedy]: -100 });
  assert.notEqual(banned, greedy);
  const forced = greedy === 42 ? 43 : 42;
  assert.equal(await first({ [forced]: 100 }), forced);
  // Chat too, with sampling: the forced token every time.
  const r = await post('/v1/chat/completions', { model: MODEL, messages: USER, max_tokens: 3, temperature: 1, seed: 5,
    ignore_eos: true, return_tokens: true, logit_bias: { [forced]: 100 } });
  assert.equal(r.status, 200, r.text);
  assert.deepEqual(r.json.choices[0].tokens, [forced, forced, forced]);
});

test('bad logprobs and logit_bias values are 400s naming the field', async () => {
  const chat = { model: MODEL, messages: USER, max_tokens: 1 };
  const biases = (n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [i, 0.5]));
  const cases = [
    ['/v1/chat/completions', { ...chat, top_logprobs: 3 }, /top_logprobs/],
    ['/v1/chat/completions', { ...chat, logprobs: true, top_logprobs: 21 }, /top_logprobs/],
    ['/v1/chat/completions', { ...chat, logprobs: 'yes' }, /logprobs/],
    ['/v1/completions', { model: MODEL, prompt: 'a', max_tokens: 1, logprobs: 6 }, /logprobs/],
    ['/v1/chat/completions', { ...chat, logit_bias: { abc: 1 } }, /logit_bias.*abc/],
    ['/v1/chat/completions', { ...chat, logit_bias: { '-1': 1 } }, /logit_bias/],
    ['/v1/chat/completions', { ...chat, logit_bias: { 99999999: 1 } }, /logit_bias.*99999999/],
    ['/v1/chat/completions', { ...chat, logit_bias: { 5: 101 } }, /logit_bias\.5/],
    ['/v1/chat/completions', { ...chat, logit_bias: { 5: 'x' } }, /logit_bias\.5/],
    ['/v1/chat/completions', { ...chat, logit_bias: [1] }, /logit_bias/],
    // Every object of a request holds at most 256 keys (json_limits.h), so that is logit_bias's limit too.
    ['/v1/completions', { model: MODEL, prompt: 'a', max_tokens: 1, logit_bias: biases(257) }, /more than 256 keys/],
  ];
  for (const [path, body, pattern] of cases) {
    const r = await post(path, body);
    assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 200)}: ${r.text}`);
    assert.match(r.json.error.message, pattern);
  }
  const ok = await post('/v1/completions', { model: MODEL, prompt: 'a', max_tokens: 1, logit_bias: biases(256) });
  assert.equal(ok.status, 200, ok.text);
});
