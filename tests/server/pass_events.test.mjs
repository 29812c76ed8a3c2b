// The pass-event extension ("clover": {"pass_events": true}, docs/server.md "Pass events"): the
// official openai client iterating choices[0].delta gets exactly the same text with the option on
// as off, and the events describe the blocks that produced that text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, post, MODEL } from './helpers.mjs';

const oai = client();
const QUESTION = [{ role: 'user', content: 'What is the capital of Australia? One word.' }];
// One block over several passes (most positions wait for others).
const SORT = [{ role: 'user', content: 'Sort this list: [12, 5, 33, 8, 21]' }];
const DRONES = [{ role: 'user', content: 'Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4. Reply with the JSON list of orders.' }];

async function collect(body) {
  const stream = await oai.chat.completions.create({ model: MODEL, temperature: 0, stream: true, ...body });
  const out = { content: '', reasoning: '', passes: [], chunks: 0 };
  for await (const chunk of stream) {
    ++out.chunks;
    out.content += chunk.choices[0]?.delta?.content ?? '';
    out.reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
    if (chunk.pass_event) {
      // A pass chunk is an ordinary chunk with nothing in its delta.
      assert.equal(chunk.object, 'chat.completion.chunk');
      assert.deepEqual(chunk.choices[0].delta, {});
      assert.equal(chunk.choices[0].finish_reason, null);
      out.passes.push(chunk.pass_event);
    }
  }
  return out;
}

// Replays the events block by block: every position is committed once, the masked list is what is
// left, and the text of the committed tokens (up to each block's end token) is the raw output.
function replay(passes, mode) {
  const blocks = new Map();
  let text = '';
  for (const ev of passes) {
    assert.equal(ev.size, 32);
    let b = blocks.get(ev.block);
    if (ev.kind === 'verify') {
      assert.equal(mode, 'spec');
      assert.ok(b, 'a verify pass follows its draft');
      assert.ok(ev.accepted >= 0 && ev.accepted <= ev.size - 1);
      assert.deepEqual(ev.committed, []);
      b.accepted = ev.accepted;
      continue;
    }
    assert.equal(ev.kind, mode === 'spec' ? 'draft' : 'denoise');
    if (!b) {
      assert.equal(ev.pass, 1, 'a block starts with its first pass');
      assert.equal(ev.block, blocks.size, 'blocks come in order');
      b = { tokens: new Array(ev.size).fill(null), pass: 0, accepted: -1, end: null };
      blocks.set(ev.block, b);
    }
    assert.equal(ev.pass, b.pass + 1, 'passes of a block are numbered 1, 2, ...');
    b.pass = ev.pass;
    for (const c of ev.committed) {
      assert.equal(b.tokens[c.pos], null, `position ${c.pos} committed twice`);
      assert.equal(typeof c.text, 'string');
      assert.ok(Number.isInteger(c.token));
      if (c.pos === 0) assert.equal(c.confidence, null);
      else assert.ok(c.confidence > 0 && c.confidence <= 1, `confidence ${c.confidence}`);
      b.tokens[c.pos] = c.text;
    }
    const masked = b.tokens.flatMap((t, i) => (t === null ? [i] : []));
    assert.deepEqual(ev.masked, masked);
    if (mode === 'spec') assert.deepEqual(ev.masked, [], 'a draft fills every position');
    b.end = ev.end;
  }
  for (const b of blocks.values()) {
    const upto = mode === 'spec' ? b.accepted + 1 : (b.end ?? b.tokens.length);
    text += b.tokens.slice(0, b.end == null ? upto : Math.min(upto, b.end)).filter((t) => t !== null).join('');
  }
  return { blocks: blocks.size, text };
}

for (const [mode, name, messages] of [['diffusion', 'capital', QUESTION], ['diffusion', 'sort', SORT], ['diffusion', 'drones', DRONES],
  ['spec', 'drones', DRONES]]) {
  test(`pass events on and off give the same text through the openai client (${mode}, ${name})`, async () => {
    const base = { messages, max_tokens: 160 };
    const off = await collect({ ...base, clover: { mode } });
    const on = await collect({ ...base, clover: { mode, pass_events: true } });
    assert.equal(off.passes.length, 0, 'no pass events unless asked for');
    assert.ok(on.passes.length > 0, 'pass events when asked for');
    assert.equal(on.content, off.content);
    assert.equal(on.reasoning, off.reasoning);
    assert.ok(on.content.length > 0);
    const r = replay(on.passes, mode);
    assert.ok(r.blocks >= 1);
    // The committed tokens are the model's output: the answer text is in them.
    assert.ok(r.text.includes(on.content.trim()), `${JSON.stringify(on.content)} in ${JSON.stringify(r.text)}`);
  });
}

test('pass events: AR mode has none; the text is unchanged', async () => {
  const off = await collect({ messages: QUESTION, max_tokens: 40, clover: { mode: 'ar' } });
  const on = await collect({ messages: QUESTION, max_tokens: 40, clover: { mode: 'ar', pass_events: true } });
  assert.equal(on.passes.length, 0);
  assert.equal(on.content, off.content);
});

test('pass events: a wrong type or a request that does not stream is refused', async () => {
  const bad = await post('/v1/chat/completions', { model: MODEL, messages: QUESTION, stream: true, clover: { pass_events: 'yes' } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'clover.pass_events');
  const batch = await post('/v1/chat/completions', { model: MODEL, messages: QUESTION, clover: { mode: 'diffusion', pass_events: true } });
  assert.equal(batch.status, 400);
  assert.match(batch.json.error.message, /stream/);
});
