// Slots, queue, cancellation and prefix reuse, seen from clients and /metrics; plus /tokenize,
// /detokenize and /v1/completions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, post, metrics, waitFor, MODEL, URL_BASE, API_KEY } from './helpers.mjs';

const oai = client();

// One streamed chat request read to the end through the SDK.
async function streamChat(req) {
  const stream = await oai.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let content = '', reasoning = '', finish = null, usage = null, roleFirst = false, n = 0;
  for await (const ch of stream) {
    if (n++ === 0) roleFirst = ch.choices[0]?.delta?.role === 'assistant';
    const c = ch.choices[0];
    if (c) {
      content += c.delta.content ?? '';
      reasoning += c.delta.reasoning_content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (ch.usage) usage = ch.usage;
  }
  return { content, reasoning, finish, usage, roleFirst };
}

// The metrics once a generation holds the one busy slot (false after 5 s).
const oneSlotBusy = () => waitFor(async () => { const m = await metrics(); return m.clover_slots_busy === 1 && m; }, 5000);
// The metrics once no slot is busy and one more generation than in `before` counts as cancelled.
const cancelledSince = (before) => waitFor(async () => {
  const m = await metrics();
  return m.clover_slots_busy === 0 && m.clover_generations_cancelled_total > (before.clover_generations_cancelled_total ?? 0) && m;
}, 5000);

// A long streamed generation (ignore_eos) read as it comes until `abort()`; `done` settles when
// the stream ends either way.
function longGeneration(prompt) {
  const ac = new AbortController();
  const done = fetch(`${URL_BASE}/v1/completions`, {
    method: 'POST', signal: ac.signal,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ model: MODEL, prompt, max_tokens: 4000, ignore_eos: true, temperature: 0, stream: true }),
  }).then(async (res) => {
    const reader = res.body.getReader();
    while (!(await reader.read()).done);
  }).catch(() => {});
  return { done, abort: () => ac.abort() };
}

test('16 concurrent streaming clients with mixed modes get exactly the answers each gets alone (continuous batching)', async () => {
  // 6 distinct greedy requests (ar / diffusion / spec, thinking on and off, different lengths),
  // sent by 16 clients at once: 16 clients on 4 slots whose passes are batched together.
  const modes = ['ar', 'diffusion', 'spec'];
  const request = (k) => ({
    model: MODEL, messages: [{ role: 'user', content: `Client ${k}: tell me a story${' please'.repeat(k)}.` }],
    max_tokens: 8 + 2 * k, temperature: 0, clover: { mode: modes[k % 3], block_size: 8 }, enable_thinking: k % 2 === 0,
  });
  const alone = [];
  for (let k = 0; k < 6; k++) alone.push(await streamChat(request(k)));

  // A long generation holds one slot through the whole concurrent phase, so every pass in which
  // a client generates is shared with it however fast the machine is. (Without it the batching
  // statistics depend on timing: the shipped model ends most answers in under 10 tokens, and a
  // fast machine can finish one request before the next arrives.)
  const anchor = longGeneration('A story that keeps one slot busy:');
  const cancelledBefore = await metrics();
  assert.ok(await oneSlotBusy(), 'the long generation holds a slot');
  const before = await metrics();
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) => streamChat(request(i % 6))));
  const during = await metrics();
  anchor.abort();
  await anchor.done;
  assert.ok(await cancelledSince(cancelledBefore), 'the long generation was still running, and was cancelled');
  results.forEach((r, i) => {
    const k = i % 6, want = alone[k];
    assert.ok(r.roleFirst, `client ${i}: role chunk first`);
    assert.ok(['stop', 'length'].includes(r.finish), `client ${i}: finish ${r.finish}`);
    assert.ok(r.usage && r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8 + 2 * k, `client ${i}: usage`);
    assert.equal(r.content, want.content, `client ${i} (${modes[k % 3]}): content as alone`);
    assert.equal(r.reasoning, want.reasoning, `client ${i} (${modes[k % 3]}): reasoning as alone`);
    assert.equal(r.finish, want.finish, `client ${i}: finish as alone`);
    assert.equal(r.usage.completion_tokens, want.usage.completion_tokens, `client ${i}: tokens as alone`);
  });
  const m = await waitFor(async () => { const x = await metrics(); return x.clover_slots_busy === 0 && x; });
  assert.equal(m.clover_requests_deferred, 0);
  assert.ok(during.clover_batch_sequences_max >= 2, 'a forward pass held several sequences');
  // The long generation is in every pass of the window, so each pass that also held a client adds
  // one sequence or more over the pass count; a scheduler that ran clients in passes of their own
  // would add none. Every client runs one pass at least.
  const sequences = during.clover_batched_sequences_total - before.clover_batched_sequences_total;
  const passes = during.clover_batched_passes_total - before.clover_batched_passes_total;
  assert.ok(sequences - passes >= 16, `clients' passes were shared (${sequences} sequence passes in ${passes} passes)`);
});

test('streamed answers equal the non-streamed ones under concurrency (greedy)', async () => {
  const body = (i) => ({ model: MODEL, messages: [{ role: 'user', content: `Question ${i}?` }], max_tokens: 16, temperature: 0, enable_thinking: false });
  const reference = [];
  for (let i = 0; i < 4; i++) reference.push((await oai.chat.completions.create(body(i))).choices[0].message.content);
  const streamed = await Promise.all([0, 1, 2, 3].map(async (i) => {
    let s = '';
    for await (const ch of await oai.chat.completions.create({ ...body(i), stream: true })) s += ch.choices[0]?.delta?.content ?? '';
    return s;
  }));
  assert.deepEqual(streamed, reference);
});

test('a client that disconnects mid-stream frees its slot (metrics)', async () => {
  const before = await metrics();
  const ac = new AbortController();
  const res = await fetch(`${URL_BASE}/v1/completions`, {
    method: 'POST', signal: ac.signal,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ model: MODEL, prompt: 'A very long story:', max_tokens: 4000, ignore_eos: true, temperature: 0, stream: true }),
  });
  assert.equal(res.status, 200);
  // The first chunk shows the stream is open; the shipped model then mostly emits end tokens
  // (ignore_eos), which carry no text, so the server must notice the disconnect by itself.
  const reader = res.body.getReader();
  await reader.read();
  const busy = await oneSlotBusy();
  assert.ok(busy, 'generating while connected');
  ac.abort();
  const after = await cancelledSince(before);
  assert.ok(after, 'the slot was freed and the generation counted as cancelled');
  assert.ok(after.clover_tokens_predicted_total - before.clover_tokens_predicted_total < 4000, 'stopped early');
});

test('a non-streaming client that disconnects frees its slot at once (metrics)', async () => {
  const before = await metrics();
  const ac = new AbortController();
  const pending = fetch(`${URL_BASE}/v1/completions`, {
    method: 'POST', signal: ac.signal,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${API_KEY}` },
    body: JSON.stringify({ model: MODEL, prompt: 'Another very long story:', max_tokens: 4000, ignore_eos: true, temperature: 0 }),
  }).catch((e) => e);
  const busy = await oneSlotBusy();
  assert.ok(busy, 'generating while connected');
  ac.abort();
  await pending;
  const after = await cancelledSince(before);
  assert.ok(after, 'the slot was freed and the generation counted as cancelled');
  assert.ok(after.clover_tokens_predicted_total - before.clover_tokens_predicted_total < 4000, 'stopped early');
  assert.ok(after['clover_requests_total{endpoint="/v1/completions",status="499"}'] >= 1, 'counted as closed by the client');
});

test('a second chat turn reuses the first turn through its recurrent-state snapshot (thinking on)', async () => {
  // Qwen3.5's template re-renders the previous answer without its reasoning, so turn 2 diverges
  // from the slot's cache right after turn 1's conversation (before its generation prompt): the
  // snapshot kept there is restored and only the rest is evaluated.
  const messages = [{ role: 'user', content: 'First question about recurrent snapshots.' }];
  const r1 = await oai.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0, enable_thinking: true });
  const genPrompt = (await post('/tokenize', { content: '<|im_start|>assistant\n<think>\n', parse_special: true })).json.tokens;
  const answer = r1.choices[0].message;
  const req2 = {
    model: MODEL, max_tokens: 8, temperature: 0, enable_thinking: true,
    messages: [...messages, { role: 'assistant', content: answer.content ?? '' }, { role: 'user', content: 'And a second one.' }],
  };
  const r2 = await oai.chat.completions.create(req2);
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.equal(cached, r1.usage.prompt_tokens - genPrompt.length, "turn 1's conversation reused");
  assert.equal(r2.timings.cache_n, cached);
  assert.equal(r2.timings.prompt_n, r2.usage.prompt_tokens - cached, 'only the rest evaluated');
  // (That a restored snapshot gives exactly the answer of a cold evaluation is batching_test's.)
});

test('prefix reuse: a second turn extending the first only evaluates the new tokens', async () => {
  // Token prompts make the test exact: turn 2 = turn 1's prompt + its output + new tokens.
  const tok = await post('/tokenize', { content: 'The first turn of a conversation about prefix caches.' });
  const p1 = tok.json.tokens;
  const r1 = await post('/v1/completions', { model: MODEL, prompt: p1, max_tokens: 8, temperature: 0, ignore_eos: true, return_tokens: true });
  assert.equal(r1.status, 200, r1.text);
  const gen = r1.json.choices[0].tokens;
  assert.equal(gen.length, 8);
  const extra = (await post('/tokenize', { content: ' And now the second turn.' })).json.tokens;
  const p2 = [...p1, ...gen, ...extra];
  const r2 = await post('/v1/completions', { model: MODEL, prompt: p2, max_tokens: 4, temperature: 0 });
  assert.equal(r2.status, 200, r2.text);
  assert.equal(r2.json.usage.prompt_tokens, p2.length);
  assert.equal(r2.json.usage.prompt_tokens_details.cached_tokens, p1.length + gen.length);
  assert.equal(r2.json.timings.cache_n, p1.length + gen.length);
  assert.equal(r2.json.timings.prompt_n, extra.length, 'only the new tokens were evaluated');
});

test('two interleaved conversations keep their own slots and caches', async () => {
  const tokens = async (text) => (await post('/tokenize', { content: text })).json.tokens;
  const turn = async (prompt) => {
    const r = await post('/v1/completions', { model: MODEL, prompt, max_tokens: 4, temperature: 0, ignore_eos: true, return_tokens: true });
    assert.equal(r.status, 200, r.text);
    return r.json;
  };
  const a1p = await tokens('Alpha conversation, first turn.');
  const b1p = await tokens('Zulu conversation, first turn.');
  assert.notEqual(a1p[0], b1p[0]);
  const a1 = await turn(a1p);
  const b1 = await turn(b1p);
  const more = await tokens(' Next turn.');
  const a2 = await turn([...a1p, ...a1.choices[0].tokens, ...more]);
  const b2 = await turn([...b1p, ...b1.choices[0].tokens, ...more]);
  assert.equal(a2.usage.prompt_tokens_details.cached_tokens, a1p.length + 4, 'A reused its cache');
  assert.equal(b2.usage.prompt_tokens_details.cached_tokens, b1p.length + 4, 'B reused its cache');
});

test('prefix reuse in chat: a tool-loop turn with thinking off continues the cached text', async (t) => {
  // With thinking off, the Qwen3.5 template renders an assistant turn after the last user query
  // as the generation prompt + the answer, so the next request extends the slot's cached text.
  // The answer must come back byte-exact for that: the random model often writes invalid UTF-8
  // (replaced by U+FFFD) or edge whitespace (trimmed), so find a prompt whose answer is clean.
  const clean = (c) => c.length > 0 && !c.includes('\uFFFD') && c === c.trim() && !/^[\x1c-\x1f\x85]|[\x1c-\x1f\x85]$/.test(c);
  for (let i = 1; i <= 16; i++) {
    const messages = [{ role: 'user', content: `Look up item ${i} for me.` }];
    const r1 = await oai.chat.completions.create({ model: MODEL, messages, max_tokens: 3, temperature: 0, enable_thinking: false, ignore_eos: true });
    const content = r1.choices[0].message.content;
    if (!clean(content)) continue;
    const r2 = await oai.chat.completions.create({
      model: MODEL, max_tokens: 2, temperature: 0, enable_thinking: false,
      messages: [...messages, { role: 'assistant', content }, { role: 'tool', tool_call_id: 'call_1', content: 'result' }],
    });
    const cached = r2.usage.prompt_tokens_details.cached_tokens;
    // The whole of turn 1 is reused when the answer re-renders to the tokens the model produced;
    // when the parser trimmed it (a token like ".\n" comes back as "."), the recurrent state cannot
    // be rewound inside the answer and the snapshot at the end of turn 1's prompt is the most.
    const full = r1.usage.prompt_tokens + r1.usage.completion_tokens;
    assert.ok(cached === full || cached === r1.usage.prompt_tokens,
              `turn 1 reused: ${cached} cached, expected ${full} (prompt and answer) or ${r1.usage.prompt_tokens} (prompt)`);
    assert.equal(r2.timings.cache_n, cached);
    assert.equal(r2.timings.prompt_n, r2.usage.prompt_tokens - cached, 'only the new tokens evaluated');
    return;
  }
  t.skip('the model gave no byte-exact answer to reuse');
});

test('/v1/completions: text, streaming, usage', async () => {
  const r = await oai.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  let text = '', finish = null, usage = null;
  for await (const ch of await oai.completions.create({ model: MODEL, prompt: 'Once upon a time', max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true } })) {
    if (ch.choices[0]) { text += ch.choices[0].text; finish = ch.choices[0].finish_reason ?? finish; }
    if (ch.usage) usage = ch.usage;
  }
  assert.equal(text, r.choices[0].text);
  assert.equal(finish, r.choices[0].finish_reason);
  assert.deepEqual({ ...usage, prompt_tokens_details: undefined }, { ...r.usage, prompt_tokens_details: undefined });
});

test('/tokenize and /detokenize round trip', async () => {
  const t = await post('/tokenize', { content: 'hello world <|im_end|>', with_pieces: true });
  assert.equal(t.status, 200);
  assert.ok(t.json.tokens.every((p) => Number.isInteger(p.id) && typeof p.piece === 'string'));
  const ids = t.json.tokens.map((p) => p.id);
  const d = await post('/detokenize', { tokens: ids });
  assert.equal(d.json.content, 'hello world <|im_end|>');
});

test('/metrics: Prometheus text with the documented series', async () => {
  const res = await fetch(`${URL_BASE}/metrics`, { headers: { Authorization: `Bearer ${API_KEY}` } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /text\/plain/);
  const text = await res.text();
  for (const name of ['clover_requests_total', 'clover_tokens_predicted_total', 'clover_predicted_tokens_per_second',
    'clover_requests_deferred', 'clover_slots_busy', 'clover_slots_total', 'clover_passes_per_block', 'clover_prompt_tokens_total']) {
    assert.match(text, new RegExp(`^# TYPE ${name} `, 'm'), name);
  }
  assert.match(text, /clover_requests_total\{endpoint="\/v1\/chat\/completions",status="200"\} \d+/);
  const m = await metrics();
  assert.equal(m.clover_slots_total, 4);
});

test('an answer that ends on an end token keeps its slot: the next turn reuses it, slots are taken least recently used', async () => {
  // Four conversations fill the four slots; Z's answer ends on the model's end token (not on
  // max_tokens). A fifth, unrelated conversation must then take the least recently used slot
  // (W's), not Z's: Z's slot still holds Z's conversation, end token included.
  const tokens = async (text, special = false) => (await post('/tokenize', { content: text, parse_special: special })).json.tokens;
  const turn = async (prompt, extra = {}) => {
    const r = await post('/v1/completions', { model: MODEL, prompt, temperature: 0, return_tokens: true, ...extra });
    assert.equal(r.status, 200, r.text);
    return r.json;
  };
  const fixed = { max_tokens: 4, ignore_eos: true };
  const w = await tokens('Walrus conversation, first turn.');
  const x = await tokens('Xylophone conversation, first turn.');
  const y = await tokens('Yacht conversation, first turn.');
  const z = await tokens('<|im_start|>user\nWhat is the capital of Australia? One word.<|im_end|>\n<|im_start|>assistant\n', true);
  const v = await tokens('Velvet conversation, first turn.');
  assert.equal(new Set([w[0], x[0], y[0], z[0], v[0]]).size, 5, 'the prompts must not share a first token');
  const w1 = await turn(w, fixed);
  const x1 = await turn(x, fixed);
  const y1 = await turn(y, fixed);
  const z1 = await turn(z, { max_tokens: 300 });
  assert.equal(z1.choices[0].finish_reason, 'stop', 'Z must end on an end token');
  const zgen = z1.choices[0].tokens;
  const ends = [(await tokens('<|im_end|>', true))[0], (await tokens('<|endoftext|>', true))[0]];
  assert.ok(ends.includes(zgen[zgen.length - 1]), 'the returned tokens end with an end token');
  await turn(v, fixed);  // evicts the least recently used slot: W's

  const more = await tokens(' Next turn.');
  const z2 = await turn([...z, ...zgen, ...more], fixed);
  assert.equal(z2.usage.prompt_tokens_details.cached_tokens, z.length + zgen.length, "Z's slot kept Z's conversation");
  const y2 = await turn([...y, ...y1.choices[0].tokens, ...more], fixed);
  assert.equal(y2.usage.prompt_tokens_details.cached_tokens, y.length + 4, "Y's slot kept Y's conversation");
  const x2 = await turn([...x, ...x1.choices[0].tokens, ...more], fixed);
  assert.equal(x2.usage.prompt_tokens_details.cached_tokens, x.length + 4, "X's slot kept X's conversation");
  const w2 = await turn([...w, ...w1.choices[0].tokens, ...more], fixed);
  assert.equal(w2.usage.prompt_tokens_details.cached_tokens, 0, "W's slot (the least recently used) went to V");
});

test('max_tokens only truncates the answer in every mode (diffusion: a limit does not shrink the block)', async () => {
  const prompt = (await post('/tokenize', {
    content: '<|im_start|>user\nWrite a long story about a drone that delivers parcels in Lisbon.<|im_end|>\n<|im_start|>assistant\n',
    parse_special: true,
  })).json.tokens;
  const complete = async (n, extra) => {
    const r = await post('/v1/completions', { model: MODEL, prompt, max_tokens: n, temperature: 0, ignore_eos: true, return_tokens: true, ...extra });
    assert.equal(r.status, 200, r.text);
    return r.json.choices[0].tokens;
  };
  // threshold 1: (nearly) one position per pass.
  const modes = [{ mode: 'ar' }, { mode: 'spec' }, { mode: 'diffusion' }, { mode: 'diffusion', threshold: 1 }];
  for (const extra of modes.map((c) => ({ clover: c }))) {
    const full = await complete(64, extra);
    assert.equal(full.length, 64);
    for (const n of [20, 48]) {
      assert.deepEqual(await complete(n, extra), full.slice(0, n), `${JSON.stringify(extra)}: max_tokens ${n} is not a prefix of max_tokens 64`);
    }
  }
});
