// Issue #26: request limits, slow clients, HTTP framing and authentication, each bounded in time.
// run_server_tests.sh starts the server with --header-timeout 2 --body-timeout 3.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { post, metrics, sseEvents, spawnServer, waitFor, MODEL, URL_BASE, API_KEY } from './helpers.mjs';

const { hostname: HOST, port: PORT } = new URL(URL_BASE);
const HEADER_TIMEOUT_MS = 2000;
const BODY_TIMEOUT_MS = 3000;

// Sends `chunks` (strings, or numbers = pauses in ms) on one connection; resolves with what the
// server wrote until it closed or `limitMs` passed, and the time that took.
function raw(chunks, { halfClose = false, limitMs = 15000, port = PORT } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect(Number(port), HOST);
    let out = '';
    let done = false;
    let firstMs = null;
    const finish = () => { if (!done) { done = true; s.destroy(); resolve({ text: out, ms: Date.now() - t0, firstMs }); } };
    const timer = setTimeout(finish, limitMs);
    s.on('data', (d) => { out += d; firstMs ??= Date.now() - t0; });
    s.on('close', () => { clearTimeout(timer); finish(); });
    s.on('error', () => {});
    s.on('connect', async () => {
      for (const c of chunks) {
        if (done) return;
        if (typeof c === 'number') await new Promise((r) => setTimeout(r, c));
        else s.write(c);
      }
      if (halfClose) s.end();
    });
  });
}

const statusOf = (text) => Number((text.match(/^HTTP\/1\.1 (\d{3})/) ?? [])[1]);
const auth = `Authorization: Bearer ${API_KEY}\r\n`;

test('an object of 150,000 keys is refused at once, naming the limit', async () => {
  const keys = Array.from({ length: 150000 }, (_, i) => `"k${i}":0`).join(',');
  const t0 = Date.now();
  const r = await post('/tokenize', `{"content":"x","junk":{${keys}}}`);
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /more than 256 keys/);
  assert.ok(Date.now() - t0 < 3000, `answered in ${Date.now() - t0} ms`);
});

test('an array of 300,000 values is refused at once; 160,000 {} cost little', async () => {
  let t0 = Date.now();
  const r = await post('/tokenize', `{"content":"x","junk":[${'{},'.repeat(299999)}{}]}`);
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /more than 262144 JSON values/);
  assert.ok(Date.now() - t0 < 3000, `answered in ${Date.now() - t0} ms`);
  t0 = Date.now();
  const ok = await post('/tokenize', `{"content":"x","junk":[${'{},'.repeat(159999)}{}]}`);
  assert.equal(ok.status, 200, ok.text);
  assert.ok(Date.now() - t0 < 3000, `answered in ${Date.now() - t0} ms`);
});

test('a body over 16 MiB: 413 naming the size limit, not the form limit', async () => {
  const r = await raw([`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${17 << 20}\r\n\r\n{"messages":`]);
  assert.equal(statusOf(r.text), 413, r.text);
  assert.match(r.text, /larger than 16 MiB/);
  assert.doesNotMatch(r.text, /form/);
  assert.ok(r.ms < BODY_TIMEOUT_MS + 1500, `answered after ${r.ms} ms`);
});

test('headers sent one line at a time: 408 at the header deadline', async () => {
  const lines = ['POST /v1/completions HTTP/1.1\r\n'];
  for (let i = 0; i < 10; i++) lines.push(700, `X-Slow-${i}: 1\r\n`);
  const r = await raw(lines);
  assert.equal(statusOf(r.text), 408, r.text);
  assert.ok(r.ms < HEADER_TIMEOUT_MS + 1500, `answered after ${r.ms} ms`);
});

test('a body shorter than its Content-Length: 408 at the body deadline', async () => {
  const r = await raw([`POST /v1/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"prompt":`]);
  assert.equal(statusOf(r.text), 408, r.text);
  assert.match(r.text, /not received in time/);
  assert.ok(r.ms < BODY_TIMEOUT_MS + 1500, `answered after ${r.ms} ms`);
});

test('/health answers at once while slow clients hold every general thread; other paths get 503 busy', async (t) => {
  if (!process.env.CLOVER_BIN) return t.skip('CLOVER_BIN not set');
  // A server of its own (no idle keep-alive connections of other tests): 1 slot + queue 1 + 16 =
  // 18 general threads, then 4 reserve ones; 20 slow clients take the general ones and 2 reserve.
  const { port, proc, log } = await spawnServer(['--parallel', '1', '--max-queue', '1', '-t', '1', '--header-timeout', '2']);
  try {
    const slow = Array.from({ length: 20 }, () => raw(['GET /health HTTP/1.1\r\n', 1000, 'X-A: 1\r\n', 5000], { limitMs: 8000, port }));
    await new Promise((r) => setTimeout(r, 600));
    const h = await raw(['GET /health HTTP/1.1\r\nHost: x\r\n\r\n'], { port });
    assert.equal(statusOf(h.text), 200, h.text);
    assert.ok(h.ms < 1000, `health took ${h.ms} ms (first byte at ${h.firstMs} ms): ${h.text} ${log()}`);
    const busy = await raw(['GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'], { port });
    assert.equal(statusOf(busy.text), 503, busy.text);
    assert.match(busy.text, /busy/);
    const statuses = (await Promise.all(slow)).map((a) => statusOf(a.text));
    assert.ok(statuses.every((s) => s === 408), `every slow client got a 408: ${statuses}`);
  } finally {
    proc.kill('SIGTERM');
  }
});

test('pipelined requests are all answered, in order', async () => {
  const one = (content) => {
    const body = JSON.stringify({ content });
    return `POST /tokenize HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  };
  const r = await raw([one('a') + one('bb') + one('ccc') + 'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
  const statuses = [...r.text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  assert.deepEqual(statuses, [200, 200, 200, 200], r.text);
});

test('a half-closed client still gets its answer', async () => {
  const body = JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 4, temperature: 0 });
  const r = await raw([`POST /v1/completions HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`],
    { halfClose: true });
  assert.match(r.text, /HTTP\/1\.1 200/, r.text);
  assert.match(r.text, /"text_completion"/);
});

test('auth: the scheme is case-insensitive; a NUL inside the header is refused', async () => {
  const req = (authLine) => raw([`GET /v1/models HTTP/1.1\r\nHost: x\r\n${authLine}\r\nConnection: close\r\n\r\n`]);
  assert.equal(statusOf((await req(`authorization: bearer ${API_KEY}`)).text), 200);
  assert.equal(statusOf((await req(`Authorization: BEARER ${API_KEY}`)).text), 200);
  const nul = await req(`Authorization: Bearer ${API_KEY}\0junk`);
  assert.equal(statusOf(nul.text), 400, nul.text);
  assert.match(nul.text, /NUL/);
  assert.equal(statusOf((await req(`Authorization: Bearer ${API_KEY}x`)).text), 401);
  assert.equal(statusOf((await req(`Authorization: Bearer ${API_KEY.slice(0, -1)}`)).text), 401);
});

test('repeat_penalty 0 is a 400 naming the field, not a 500', async () => {
  const r = await post('/v1/completions', { model: MODEL, prompt: 'x', max_tokens: 1, repeat_penalty: 0 });
  assert.equal(r.status, 400, r.text);
  assert.match(r.json.error.message, /repeat_penalty/);
});

test('metrics: successes are counted as 200 and a finished stream is not cancelled', async () => {
  const before = await metrics();
  for (let i = 0; i < 3; i++) {
    const { events } = await sseEvents('/v1/completions', { model: MODEL, prompt: `count ${i}`, max_tokens: 3, temperature: 0 });
    assert.equal(events.at(-1), '[DONE]');
  }
  await post('/tokenize', { content: 'x' });
  const after = await waitFor(async () => { const m = await metrics(); return m.clover_slots_busy === 0 && m; });
  assert.equal(after.clover_generations_cancelled_total ?? 0, before.clover_generations_cancelled_total ?? 0);
  assert.ok(after['clover_requests_total{endpoint="/tokenize",status="200"}'] >= 1);
  assert.ok(!Object.keys(after).some((k) => k.includes('status="-1"')), 'no status -1');
});

test('a message far larger than the context is refused by its size, before tokenising', async () => {
  const t0 = Date.now();
  const r = await post('/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'word '.repeat(2_400_000) }], max_tokens: 1 });
  assert.equal(r.status, 400, r.text);
  assert.equal(r.json.error.type, 'exceed_context_size_error');
  assert.match(r.json.error.message, /bytes, so at least \d+ tokens/);
  assert.ok(r.json.error.n_prompt_tokens >= r.json.error.n_ctx);
  assert.ok(Date.now() - t0 < 4000, `answered in ${Date.now() - t0} ms`);
});

test('tool messages name their call; tool_choice names a given tool; bad logprobs and logit_bias are refused', async () => {
  const TOOL = [{ type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } }];
  const cases = [
    [{ messages: [{ role: 'user', content: 'hi' }, { role: 'tool', content: 'r' }] }, /tool_call_id/],
    [{ messages: [{ role: 'user', content: 'hi' }], tools: TOOL, tool_choice: { type: 'function', function: { name: 'nope' } } }, /nope/],
    [{ messages: [{ role: 'user', content: 'hi' }], tool_choice: { type: 'function', function: { name: 'get_time' } } }, /get_time/],
    [{ messages: [{ role: 'user', content: 'hi' }], top_logprobs: 2 }, /top_logprobs/],
    [{ messages: [{ role: 'user', content: 'hi' }], logit_bias: { 5: 1000 } }, /logit_bias/],
  ];
  for (const [body, pattern] of cases) {
    const r = await post('/v1/chat/completions', { model: MODEL, max_tokens: 1, ...body });
    assert.equal(r.status, 400, r.text);
    assert.match(r.json.error.message, pattern);
  }
  const ok = await post('/v1/chat/completions', { model: MODEL, max_tokens: 1, messages: [{ role: 'user', content: 'hi' }],
    tools: TOOL, tool_choice: { type: 'function', function: { name: 'get_time' } }, logprobs: false, logit_bias: {} });
  assert.equal(ok.status, 200, ok.text);
});
