// llama-server's command line on `clover serve` (issue 24): the report's command line, server-wide
// sampling defaults (shown in /props, used by requests, beaten by a request's own fields), API key
// lists and key files, CLOVER_ARG_* variables (a flag beats the variable), the MoE flags' warning,
// and bad values refused naming the flag. Each test starts servers of its own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { spawnServer } from './helpers.mjs';

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

// Runs `clover ARGS` to its end (a command that must fail before serving).
function runClover(args, env = {}) {
  const r = spawnSync(process.env.CLOVER_BIN, args, { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
}

const close = (a, b) => Math.abs(a - b) < 1e-6;
const DRONES = [{ role: 'user', content: 'Dispatch orders: drone D-07 maps the north field; D-12 delivers insulin to Clinic 4. Reply with the JSON list of orders.' }];

// The command line, with `llama-server` replaced by `clover serve` (-ngl 99 -fa on: every
// layer on the GPU when there is one; here, without one, the CPU).
const REPORT_ARGS = ['--alias', 'clover-35b-a3b', '-ngl', '99', '-fa', 'on', '-c', '16384', '--jinja', '--reasoning-format', 'deepseek',
  '--presence-penalty', '0.9', '--repeat-penalty', '1.05'];

test('the report\'s llama-server command line starts and answers', async () => {
  const srv = await spawnServer([...REPORT_ARGS, '-t', '2']);
  try {
    const oai = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: 'none', maxRetries: 0 });
    const r = await oai.chat.completions.create({ model: 'clover-35b-a3b', messages: DRONES, max_tokens: 80 });
    assert.equal(r.model, 'clover-35b-a3b');
    assert.match(r.choices[0].message.content, /D-07/);
    const models = await oai.models.list();
    assert.equal(models.data[0].id, 'clover-35b-a3b');
    const props = (await call(srv.base, '/props')).json;
    const p = props.default_generation_settings.params;
    assert.ok(close(p.presence_penalty, 0.9) && close(p.repeat_penalty, 1.05), JSON.stringify(p));
    assert.equal(props.default_generation_settings.n_ctx, 16384);
    assert.equal(props.model_alias, 'clover-35b-a3b');
  } finally {
    srv.proc.kill('SIGTERM');
  }
});

test('server-wide sampling defaults: in /props, used by requests, beaten by a request\'s fields', async () => {
  const flags = ['--temp', '4', '--top-k', '0', '--top-p', '1', '--min-p', '0', '-s', '11', '-n', '6',
    '--frequency-penalty', '0.25', '--repeat-last-n', '-1', '-t', '1'];
  const srv = await spawnServer(flags);
  const ref = await spawnServer(['-t', '1']);  // llama-server's defaults
  try {
    const p = (await call(srv.base, '/props')).json.default_generation_settings.params;
    assert.deepEqual([p.temperature, p.top_k, p.top_p, p.min_p, p.seed, p.n_predict, p.repeat_last_n],
      [4, 0, 1, 0, 11, 6, -1]);
    assert.ok(close(p.frequency_penalty, 0.25));
    const q = (await call(ref.base, '/props')).json.default_generation_settings.params;
    assert.deepEqual([q.temperature, q.top_k, q.seed, q.n_predict, q.repeat_last_n].map((x) => Math.round(x * 100) / 100),
      [0.8, 40, -1, -1, 64]);
    assert.ok(close(q.top_p, 0.95) && close(q.min_p, 0.05));

    const body = { messages: DRONES, ignore_eos: true, return_tokens: true };
    const a = (await call(srv.base, '/v1/chat/completions', body)).json;
    const b = (await call(srv.base, '/v1/chat/completions', body)).json;
    assert.equal(a.usage.completion_tokens, 6, '-n 6 is the default max_tokens');
    assert.deepEqual(a.choices[0].tokens, b.choices[0].tokens, '-s 11: the same seed for every request');
    // The same fields sent explicitly to a server with llama-server's defaults give the same tokens.
    const explicit = (await call(ref.base, '/v1/chat/completions', { ...body, temperature: 4, top_k: 0, top_p: 1, min_p: 0,
      seed: 11, max_tokens: 6, frequency_penalty: 0.25, repeat_last_n: -1 })).json;
    assert.deepEqual(explicit.choices[0].tokens, a.choices[0].tokens);
    // A request's own fields win: greedy, 9 tokens.
    const greedy = (await call(srv.base, '/v1/chat/completions', { ...body, temperature: 0, max_tokens: 9 })).json;
    const greedyRef = (await call(ref.base, '/v1/chat/completions', { ...body, temperature: 0, max_tokens: 9,
      frequency_penalty: 0.25, repeat_last_n: -1 })).json;
    assert.equal(greedy.usage.completion_tokens, 9);
    assert.deepEqual(greedy.choices[0].tokens, greedyRef.choices[0].tokens);
  } finally {
    srv.proc.kill('SIGTERM');
    ref.proc.kill('SIGTERM');
  }
});

test('--api-key takes several keys, --api-key-file adds one per line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clover-keys-'));
  const file = join(dir, 'keys.txt');
  writeFileSync(file, 'k3\n\n  k4  \r\n');
  const srv = await spawnServer(['--api-key', 'k1,k2', '--api-key-file', file]);
  try {
    for (const k of ['k1', 'k2', 'k3', 'k4']) assert.equal((await call(srv.base, '/v1/models', undefined, k)).status, 200, k);
    for (const k of ['k5', 'k1,k2', '']) assert.equal((await call(srv.base, '/v1/models', undefined, k)).status, 401, k);
    assert.equal((await call(srv.base, '/health')).status, 200, '/health needs no key');
  } finally {
    srv.proc.kill('SIGTERM');
  }
  const empty = join(dir, 'empty.txt');
  writeFileSync(empty, '\n \n');
  for (const [args, pattern] of [[['--api-key', 'k1,,k2'], /--api-key: key 2 of 3 is empty/],
    [['--api-key', ''], /--api-key must not be empty/],
    [['--api-key-file', join(dir, 'missing.txt')], /--api-key-file: cannot open/],
    [['--api-key-file', empty], /--api-key-file: .* holds no key/]]) {
    const r = runClover(['serve', '-m', process.env.CLOVER_MODEL_PATH, '--port', '0', ...args]);
    assert.notEqual(r.status, 0, args.join(' '));
    assert.match(r.stderr, pattern);
  }
});

test('CLOVER_ARG_* variables set the flags; a flag beats the variable', async () => {
  const env = { CLOVER_ARG_MODEL: process.env.CLOVER_MODEL_PATH, CLOVER_ARG_ALIAS: 'env-alias', CLOVER_ARG_TEMP: '0.3',
    CLOVER_ARG_API_KEY: 'env-key', CLOVER_ARG_REASONING: 'off', CLOVER_ARG_CTX_SIZE: '2048', CLOVER_ARG_PARALLEL: '2' };
  const srv = await spawnServer([], { env, model: false });
  try {
    assert.equal((await call(srv.base, '/props', undefined, 'wrong')).status, 401);
    const props = (await call(srv.base, '/props', undefined, 'env-key')).json;
    assert.equal(props.model_alias, 'env-alias');
    assert.equal(props.model_path, process.env.CLOVER_MODEL_PATH);
    assert.ok(close(props.default_generation_settings.params.temperature, 0.3));
    assert.equal(props.default_generation_settings.n_ctx, 2048);
    assert.equal(props.total_slots, 2);
    const t = (await call(srv.base, '/apply-template', { messages: DRONES }, 'env-key')).json;
    assert.ok(t.prompt.endsWith('<think>\n\n</think>\n\n'), `--reasoning off from the variable: ${JSON.stringify(t.prompt)}`);
  } finally {
    srv.proc.kill('SIGTERM');
  }
  const flagged = await spawnServer(['--alias', 'flag-alias', '--temp', '0.6', '--api-key', 'flag-key', '--reasoning', 'on'],
    { env, model: false });
  try {
    assert.equal((await call(flagged.base, '/props', undefined, 'env-key')).status, 401);
    const props = (await call(flagged.base, '/props', undefined, 'flag-key')).json;
    assert.equal(props.model_alias, 'flag-alias');
    assert.ok(close(props.default_generation_settings.params.temperature, 0.6));
    const t = (await call(flagged.base, '/apply-template', { messages: DRONES }, 'flag-key')).json;
    assert.ok(t.prompt.endsWith('<think>\n'));
  } finally {
    flagged.proc.kill('SIGTERM');
  }
  // A bad value from a variable names the flag, its range and the variable.
  const r = runClover(['serve', '--port', '0'], { CLOVER_ARG_TOP_P: '2' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /--top-p: must be a finite number in \[0, 1\] \(got 2\)/);
  assert.match(r.stderr, /CLOVER_ARG_TOP_P=2/);
  // Another subcommand's variables are not read (clover run has --temp too).
  assert.equal(runClover(['tokenize', '-m', process.env.CLOVER_MODEL_PATH, '--text', 'hi'], { CLOVER_ARG_TEMP: '7000' }).status, 0);
});

test('-ot, --cpu-moe, --n-cpu-moe and --stream-experts on the CPU backend: accepted with a note that they do nothing there', async () => {
  const srv = await spawnServer(['-ot', '.ffn_.*_exps.=CPU', '--n-cpu-moe', '20', '--stream-experts', '8', '--device', 'cpu']);
  try {
    assert.match(srv.log(), /note: --cpu-moe, --n-cpu-moe, -ot, --vram-budget and --stream-experts do nothing on the CPU backend/);
  } finally {
    srv.proc.kill('SIGTERM');
  }
  const quiet = await spawnServer([]);
  try {
    assert.doesNotMatch(quiet.log(), /do nothing on the CPU backend/);
  } finally {
    quiet.proc.kill('SIGTERM');
  }
});

test('bad flag values: an error naming the flag and its range', () => {
  const cases = [
    [['--temp', '-1'], /--temp: must be a finite number in \[0, 100\]/],
    [['--top-p', '1.5'], /--top-p: .*\[0, 1\]/],
    [['--presence-penalty', '3'], /--presence-penalty: .*\[-2, 2\]/],
    [['--repeat-penalty', '0'], /--repeat-penalty: .*\(0, 10\]/],
    [['--repeat-last-n', '-2'], /--repeat-last-n: .*\[-1, /],
    [['-s', '-5'], /--seed: .*\[-1, /],
    [['-n', '-3'], /--n-predict: .*\[-1, /],
    [['--reasoning-budget', '-2'], /--reasoning-budget: .*\[-1, /],
    [['--reasoning', 'maybe'], /--reasoning: maybe not in \{on,off,auto\}/],
    [['--reasoning-format', 'xml'], /--reasoning-format/],
    [['-ot', 'exps'], /-ot "exps": give REGEX=cpu or REGEX=vulkan/],
    [['--vram-budget', '12X'], /size "12X"/],
    [['--n-cpu-moe', '-1'], /--n-cpu-moe/],
    [['--alias', 'a,,b'], /--alias: an alias is empty/],
    [['--reasoning', 'off', '--chat-template-kwargs', '{"enable_thinking":true}'], /--reasoning off contradicts/],
  ];
  for (const [args, pattern] of cases) {
    const r = runClover(['serve', '-m', process.env.CLOVER_MODEL_PATH, '--port', '0', ...args]);
    assert.notEqual(r.status, 0, args.join(' '));
    assert.match(r.stderr, pattern, args.join(' '));
  }
});

test('clover run takes the same sampling flags', () => {
  const base = ['run', '-m', process.env.CLOVER_MODEL_PATH, '-p', 'The secret code is', '-n', '8', '--ignore-eos',
    '--print-tokens', '-t', '1'];
  const sampled = ['--temp', '3', '--top-k', '0', '--top-p', '1', '--min-p', '0', '--presence-penalty', '0.5',
    '--frequency-penalty', '0.5', '--repeat-penalty', '1.1', '--repeat-last-n', '-1'];
  const a = runClover([...base, ...sampled, '-s', '5']);
  const b = runClover([...base, ...sampled, '-s', '5']);
  const c = runClover([...base, ...sampled, '-s', '6']);
  assert.equal(a.status, 0, a.stderr);
  const ids = (r) => JSON.parse(r.stdout.trim().split('\n').pop());
  assert.equal(ids(a).length, 8);
  assert.deepEqual(ids(a), ids(b));
  assert.notDeepEqual(ids(a), ids(c), 'the seed is used');
  // From the variables, as from the flags.
  const env = runClover(base, { CLOVER_ARG_TEMP: '3', CLOVER_ARG_TOP_K: '0', CLOVER_ARG_TOP_P: '1', CLOVER_ARG_MIN_P: '0',
    CLOVER_ARG_PRESENCE_PENALTY: '0.5', CLOVER_ARG_FREQUENCY_PENALTY: '0.5', CLOVER_ARG_REPEAT_PENALTY: '1.1',
    CLOVER_ARG_REPEAT_LAST_N: '-1', CLOVER_ARG_SEED: '5' });
  assert.deepEqual(ids(env), ids(a));
  const bad = runClover([...base, '--frequency-penalty', '3']);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /--frequency-penalty: .*\[-2, 2\]/);
});

// How the weights come into memory (issue #25, docs/loading.md): /health and /metrics report the
// background pre-fault until it is done; --no-mmap and --mlock serve the same greedy answer (the
// pre-fault then has nothing to do: "off"); SIGTERM right after "ready" stops cleanly.
test('--prefault, --no-mmap and --mlock: reported in /health and /metrics, same answers', async () => {
  const ask = { messages: DRONES, max_tokens: 12, temperature: 0 };
  const answers = [];
  for (const [args, state] of [[[], 'done'], [['--prefault', 'off'], 'off'], [['--no-mmap'], 'off'], [['--mlock', '--prefault', 'wait'], null]]) {
    const srv = await spawnServer(['--metrics', ...args]);
    try {
      let health = null;
      for (let i = 0; i < 400; i++) {
        health = (await call(srv.base, '/health')).json;
        if (health.prefault.state !== 'running') break;
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.equal(health.status, 'ok');
      // --mlock: locked (off) as root or within RLIMIT_MEMLOCK, else refused with a warning and walked (done).
      if (state !== null) assert.equal(health.prefault.state, state, args.join(' '));
      else assert.ok(['off', 'done'].includes(health.prefault.state), health.prefault.state);
      if (health.prefault.state === 'done') {
        assert.ok(health.prefault.total_bytes > 0);
        assert.equal(health.prefault.done_bytes, health.prefault.total_bytes);
      }
      const metrics = (await call(srv.base, '/metrics')).text;
      assert.match(metrics, new RegExp(`clover_prefault_done ${health.prefault.state === 'done' ? 1 : 0}\\n`));
      assert.match(metrics, /clover_prefault_bytes_total \d+\n/);
      answers.push((await call(srv.base, '/v1/chat/completions', ask)).json.choices[0].message.content);
    } finally {
      srv.proc.kill('SIGTERM');
    }
    const code = await new Promise((r) => srv.proc.on('exit', (c, sig) => r(c ?? sig)));
    assert.equal(code, 0, `exit after SIGTERM (${args.join(' ')}): ${srv.log()}`);
  }
  for (const a of answers.slice(1)) assert.equal(a, answers[0]);
});
